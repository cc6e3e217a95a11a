package sim

import (
	"fmt"
	"io"
	"math"
)

// WriteCDF draws the JCT CDF of each report as one SVG line (log-scaled
// hours), so a person can compare policies at a glance.
func WriteCDF(w io.Writer, reps []Report) error {
	const W, H, L, B = 720.0, 440.0, 70.0, 50.0
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, r := range reps {
		for _, v := range r.JCTHours {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	if math.IsInf(lo, 1) {
		lo, hi = 0.1, 1
	}
	lo, hi = math.Log10(math.Max(lo, 1e-3)), math.Log10(math.Max(hi, 1e-3))+1e-9
	x := func(v float64) float64 { return L + (math.Log10(math.Max(v, 1e-3))-lo)/(hi-lo)*(W-L-20) }
	y := func(f float64) float64 { return H - B - f*(H-B-20) }
	colors := []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"}
	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%g" height="%g" font-family="sans-serif" font-size="12">`+"\n", W, H)
	fmt.Fprintf(w, `<rect width="100%%" height="100%%" fill="white"/><line x1="%g" y1="%g" x2="%g" y2="%g" stroke="black"/><line x1="%g" y1="%g" x2="%g" y2="20" stroke="black"/>`+"\n", L, H-B, W-20, H-B, L, H-B, L)
	for e := math.Floor(lo); e <= math.Ceil(hi); e++ {
		v := math.Pow(10, e)
		if px := x(v); px >= L && px <= W-20 {
			fmt.Fprintf(w, `<text x="%g" y="%g" text-anchor="middle">%g</text>`+"\n", px, H-B+16, v)
		}
	}
	for _, f := range []float64{0, 0.25, 0.5, 0.75, 1} {
		fmt.Fprintf(w, `<text x="%g" y="%g" text-anchor="end">%g</text>`+"\n", L-6, y(f)+4, f)
	}
	fmt.Fprintf(w, `<text x="%g" y="%g" text-anchor="middle">JCT (hours, log scale)</text><text x="16" y="%g" transform="rotate(-90 16 %g)" text-anchor="middle">fraction of jobs</text>`+"\n", (W+L)/2, H-10, H/2, H/2)
	for i, r := range reps {
		c := colors[i%len(colors)]
		fmt.Fprintf(w, `<polyline fill="none" stroke="%s" stroke-width="2" points="`, c)
		for j, v := range r.JCTHours {
			fmt.Fprintf(w, "%.1f,%.1f ", x(v), y(float64(j+1)/float64(len(r.JCTHours))))
		}
		fmt.Fprintln(w, `"/>`)
		fmt.Fprintf(w, `<text x="%g" y="%g" fill="%s">%s (avg %.2f h)</text>`+"\n", L+10, 36+16*float64(i), c, r.Policy, r.AvgJCTHours)
	}
	_, err := fmt.Fprintln(w, "</svg>")
	return err
}
