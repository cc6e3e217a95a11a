package hints

import (
	"strings"
	"testing"
)

func TestParseKindAndService(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ env, kind, service string }{
		{"_SLURM_SPANK_OPTION_rota_rota_kind=interactive", "interactive", ""},
		{"_SLURM_SPANK_OPTION_rota_rota_kind=Serve", "serve", ""},
		{"_SLURM_SPANK_OPTION_rota_rota_kind=batch", "batch", ""},
		{"_SLURM_SPANK_OPTION_rota_rota_service=llm-7b.v2", "", "llm-7b.v2"},
	} {
		o, err := Parse([]string{c.env})
		if err != nil || o.Hints.Kind != c.kind || o.Hints.Service != c.service {
			t.Errorf("%q: kind %q service %q err %v, want %q %q", c.env, o.Hints.Kind, o.Hints.Service, err, c.kind, c.service)
		}
	}
}

func TestParseGPUMem(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		env  string
		want uint64
	}{
		{"_SLURM_SPANK_OPTION_rota_rota_gpu_mem=16G", 16 << 30},
		{"_SLURM_SPANK_OPTION_rota_rota_gpu_mem=20480M", 20 << 30},
		{"_SLURM_SPANK_OPTION_rota_rota_gpu_mem=512", 512 << 20}, // megabytes, as Slurm's --mem
		{"_SLURM_SPANK_OPTION_rota_rota_gpu_mem=1t", 1 << 40},
	} {
		o, err := Parse([]string{c.env})
		if err != nil || o.Hints.GPUMemBytes != c.want {
			t.Errorf("%q: %d bytes, err %v; want %d", c.env, o.Hints.GPUMemBytes, err, c.want)
		}
	}
}

func TestParseShareAndModel(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ env, share, model string }{
		{"_SLURM_SPANK_OPTION_rota_rota_share=yes", "yes", ""},
		{"_SLURM_SPANK_OPTION_rota_rota_share=NO", "no", ""},
		{"_SLURM_SPANK_OPTION_rota_rota_model=ResNet-50 (batch size 64)", "", "ResNet-50 (batch size 64)"},
		{"_SLURM_SPANK_OPTION_rota_rota_model=A3C", "", "A3C"},
	} {
		o, err := Parse([]string{c.env})
		if err != nil || o.Hints.Share != c.share || o.Hints.Model != c.model {
			t.Errorf("%q: share %q model %q err %v, want %q %q", c.env, o.Hints.Share, o.Hints.Model, err, c.share, c.model)
		}
	}
}

func TestParseChain(t *testing.T) {
	for _, c := range []struct{ env, want string }{
		{"", ""},
		{"_SLURM_SPANK_OPTION_rota_rota_chain=", "on"}, // a bare --rota-chain
		{"_SLURM_SPANK_OPTION_rota_rota_chain=on", "on"},
		{"_SLURM_SPANK_OPTION_rota_rota_chain=OFF", "off"},
	} {
		o, err := Parse([]string{c.env})
		if err != nil || o.Hints.Chain != c.want {
			t.Errorf("%q: chain %q err %v, want %q", c.env, o.Hints.Chain, err, c.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, env := range []string{
		"_SLURM_SPANK_OPTION_rota_rota=maybe",
		"_SLURM_SPANK_OPTION_rota_rota_steps=-5",
		"_SLURM_SPANK_OPTION_rota_rota_steps=0",
		"_SLURM_SPANK_OPTION_rota_rota_throughput=v100",
		"_SLURM_SPANK_OPTION_rota_rota_throughput=v100:fast",
		"_SLURM_SPANK_OPTION_rota_rota_throughput=v100:-1",
		"_SLURM_SPANK_OPTION_rota_rota_throughput=v 100:1",
		"_SLURM_SPANK_OPTION_rota_rota_checkpoint_signal=KILL",
		"_SLURM_SPANK_OPTION_rota_rota_checkpoint_signal=",
		"_SLURM_SPANK_OPTION_rota_rota_chain=maybe",
		"_SLURM_SPANK_OPTION_rota_rota_types=",
		"_SLURM_SPANK_OPTION_rota_rota_types=v100,",
		"_SLURM_SPANK_OPTION_rota_rota_types=v100|p100",
		"_SLURM_SPANK_OPTION_rota_rota_types=100",
		"_SLURM_SPANK_OPTION_rota_rota_kind=",
		"_SLURM_SPANK_OPTION_rota_rota_kind=notebook",
		"_SLURM_SPANK_OPTION_rota_rota_service=",
		"_SLURM_SPANK_OPTION_rota_rota_service=-web",
		"_SLURM_SPANK_OPTION_rota_rota_service=a b",
		"_SLURM_SPANK_OPTION_rota_rota_service=" + strings.Repeat("x", 65),
		"_SLURM_SPANK_OPTION_rota_rota_gpu_mem=",
		"_SLURM_SPANK_OPTION_rota_rota_gpu_mem=0",
		"_SLURM_SPANK_OPTION_rota_rota_gpu_mem=16GB",
		"_SLURM_SPANK_OPTION_rota_rota_gpu_mem=-1G",
		"_SLURM_SPANK_OPTION_rota_rota_gpu_mem=lots",
		"_SLURM_SPANK_OPTION_rota_rota_share=",
		"_SLURM_SPANK_OPTION_rota_rota_share=sometimes",
		"_SLURM_SPANK_OPTION_rota_rota_model=",
		"_SLURM_SPANK_OPTION_rota_rota_model=" + strings.Repeat("x", 129),
		"_SLURM_SPANK_OPTION_rota_rota_model=res\tnet",
	} {
		if _, err := Parse([]string{env}); err == nil {
			t.Errorf("%s accepted", env)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add("_SLURM_SPANK_OPTION_rota_rota_throughput=v100:10,k80:2.5")
	f.Add("_SLURM_SPANK_OPTION_rota_rota_types=v100,p100")
	f.Add("_SLURM_SPANK_OPTION_rota_rota_steps=100")
	f.Add("_SLURM_SPANK_OPTION_rota_rota=off")
	f.Add("_SLURM_SPANK_OPTION_rota_rota_chain=on")
	f.Add("_SLURM_SPANK_OPTION_rota_rota_kind=serve")
	f.Add("_SLURM_SPANK_OPTION_rota_rota_service=llm")
	f.Add("_SLURM_SPANK_OPTION_rota_rota_gpu_mem=16G")
	f.Add("_SLURM_SPANK_OPTION_rota_rota_share=yes")
	f.Add("_SLURM_SPANK_OPTION_rota_rota_model=ResNet-18 (batch size 64)")
	f.Fuzz(func(t *testing.T, env string) {
		o, err := Parse([]string{env})
		if err != nil {
			return
		}
		if k := o.Hints.Kind; k != "" && k != "batch" && k != "interactive" && k != "serve" {
			t.Fatalf("accepted kind %q from %q", k, env)
		}
		if sh := o.Hints.Share; sh != "" && sh != "yes" && sh != "no" {
			t.Fatalf("accepted share %q from %q", sh, env)
		}
		if m := o.Hints.Model; m != "" {
			if _, err := ParseModel(m); err != nil {
				t.Fatalf("accepted model %q from %q: %v", m, env, err)
			}
		}
		if checkName(o.Hints.Service) != nil && o.Hints.Service != "" {
			t.Fatalf("accepted service %q from %q", o.Hints.Service, env)
		}
		for typ, r := range o.Hints.Throughput {
			if !(r > 0) || typ == "" {
				t.Fatalf("accepted %q -> %v", env, o.Hints.Throughput)
			}
		}
	})
}

func TestScriptHash(t *testing.T) {
	a, b := ScriptHash([]byte("#!/bin/sh\ntrain\n")), ScriptHash([]byte("#!/bin/sh\ntrain 2\n"))
	if len(a) != 32 || a == b || a != ScriptHash([]byte("#!/bin/sh\ntrain\n")) {
		t.Fatalf("hashes %q %q", a, b)
	}
	if ScriptHash(nil) != "" {
		t.Fatal("empty script hashed")
	}
}
