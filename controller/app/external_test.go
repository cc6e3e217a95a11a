package app

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLoadEstimatorConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "controller.conf")
	for _, tc := range []struct {
		name, text string
		want       EstimatorPlugins
		wantErr    string
	}{
		{"none", "", EstimatorPlugins{}, ""},
		{"both", "estimator_throughput = /usr/libexec/rota/est --table /etc/rota/speeds.csv\n" +
			"estimator_walltime = /usr/libexec/rota/wall\nestimator_timeout = 150ms\n",
			EstimatorPlugins{Throughput: "/usr/libexec/rota/est --table /etc/rota/speeds.csv",
				Walltime: "/usr/libexec/rota/wall", Timeout: 150 * time.Millisecond}, ""},
		{"timeout too long", "estimator_timeout = 1m\n", EstimatorPlugins{}, "estimator_timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			writeFile(t, path, tc.text)
			c, err := LoadConfig(path)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Estimators != tc.want {
				t.Fatalf("got %+v, want %+v", c.Estimators, tc.want)
			}
		})
	}
}
