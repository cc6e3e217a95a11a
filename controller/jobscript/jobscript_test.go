package jobscript

import (
	"reflect"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name   string
		script string
		want   Job
		err    string
	}{
		{"typical training script", `#!/bin/bash
#SBATCH --job-name=resnet50
#SBATCH -p gpu
#SBATCH --gres=gpu:v100:2
#SBATCH --time=1-12:00:00
#SBATCH -N 1 --ntasks-per-node=2   # two ranks
#SBATCH --cpus-per-task=8
#SBATCH --mem=64G
#SBATCH --rota-steps=500000 --rota-throughput=v100:12.5,k80:3
srun python train.py
#SBATCH --partition=ignored-after-the-first-command
`, Job{Name: "resnet50", Partitions: []string{"gpu"}, GPUsPerNode: 2, GPUType: "v100", TimeMin: 36 * 60, Nodes: 1,
			TasksPerNode: 2, CPUsPerTask: 8, MemMB: 64 * 1024, Steps: 500000, Throughput: map[string]float64{"v100": 12.5, "k80": 3}}, ""},
		{"short options, attached and separate values", "#!/bin/sh\n#SBATCH -G2 -n 4 -c2 -t 90 -J 'my job' -N2-4\n# a comment\n\n#SBATCH --gpus-per-task=a100:1\n",
			Job{GPUsPerJob: 2, Tasks: 4, CPUsPerTask: 2, TimeMin: 90, Name: "my job", Nodes: 2, GPUsPerTask: 1, GPUType: "a100"}, ""},
		{"untyped gres with another gres, partitions list, CRLF", "#SBATCH --gres=gpu:4,nvme:1\r\n#SBATCH --partition=a,b\r\n",
			Job{GPUsPerNode: 4, Partitions: []string{"a", "b"}}, ""},
		{"unknown options skipped, --rota=off", "#SBATCH --exclusive --account=ml -A ml --rota=off --mail-type=END\n",
			Job{Off: true}, ""},
		{"#SBATCHX and indented comments are not directives", "  #SBATCHX --gpus=2\n#SBATCH\n#  SBATCH --gpus=3\n", Job{}, ""},
		{"memory units", "#SBATCH --mem=512K\n", Job{MemMB: 1}, ""},
		{"bad time", "#SBATCH --time=soon\n", Job{}, "line 1: --time"},
		{"bad gres", "#SBATCH\n#SBATCH --gres=gpu:v100:x\n", Job{}, "line 2: --gres"},
		{"zero gpus", "#SBATCH --gpus=0\n", Job{}, "positive count"},
		{"bad steps", "#SBATCH --rota-steps=many\n", Job{}, "--rota-steps"},
		{"bad hint", "#SBATCH --rota-throughput=v100\n", Job{}, "TYPE:STEPS_PER_S"},
		{"two types", "#SBATCH --gres=gpu:v100:1 --gpus=k80:1\n", Job{}, "both asked for"},
		{"missing value", "#SBATCH --partition\n", Job{}, "needs a value"},
		{"unclosed quote", "#SBATCH -J 'oops\n", Job{}, "unclosed quote"},
		{"bad mem", "#SBATCH --mem=lots\n", Job{}, "--mem"},
		{"bad nodes", "#SBATCH -N 0\n", Job{}, "--nodes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse([]byte(tc.script))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// FuzzParse: any script either parses or fails with an error; it never
// panics, and what it accepts is within the bounds the estimate relies on.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"#!/bin/bash\n#SBATCH --gres=gpu:v100:2 -N 2 --time=1-00:00:00\n#SBATCH --rota-steps=100\nsrun x\n",
		"#SBATCH -G k80:3 -c4 --mem=16G --rota-throughput=k80:1.5,v100:6\n",
		"#SBATCH -J 'a b' \"c\" # comment\n",
		"#SBATCH --gpus-per-task=2 --ntasks=3 --partition=a,,b\n",
		"#SBATCH --mem=\n#SBATCH -t\n",
		"#SBATCH --gres=gpu:a100:1(S:0)\n",
		"\r\n#SBATCH --rota=off\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		j, err := Parse(b)
		if err != nil {
			return
		}
		if j.GPUsPerNode > 1<<20 || j.GPUsPerJob > 1<<20 || j.GPUsPerTask > 1<<20 || j.Nodes > 1<<20 {
			t.Fatalf("accepted absurd counts: %+v", j)
		}
		for ty, v := range j.Throughput {
			if ty == "" || !(v > 0) {
				t.Fatalf("accepted hint %q=%v", ty, v)
			}
		}
		for _, p := range j.Partitions {
			if p == "" {
				t.Fatal("empty partition accepted")
			}
		}
	})
}
