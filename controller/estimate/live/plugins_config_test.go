package live

import (
	"strings"
	"testing"
	"time"

	"github.com/rota-hpc/rota/internal/conf"
)

func TestPluginsRead(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, text string
		want       Plugins
		wantErr    string
	}{
		{"none", "", Plugins{}, ""},
		{"both", "estimator_throughput = /usr/libexec/rota/est --table /etc/rota/speeds.csv\n" +
			"estimator_walltime = /usr/libexec/rota/wall\nestimator_timeout = 150ms\n",
			Plugins{Throughput: "/usr/libexec/rota/est --table /etc/rota/speeds.csv",
				Walltime: "/usr/libexec/rota/wall", Timeout: 150 * time.Millisecond}, ""},
		{"timeout too long", "estimator_timeout = 1m\n", Plugins{}, "estimator_timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := conf.Parse(strings.NewReader(tc.text), "controller.conf")
			if err != nil {
				t.Fatal(err)
			}
			var p Plugins
			p.Read(v)
			err = v.Err()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p != tc.want {
				t.Fatalf("got %+v, want %+v", p, tc.want)
			}
		})
	}
}
