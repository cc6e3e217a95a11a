// Package pkgtest builds the rota-agent RPM and .deb with `make rpm deb`
// and checks what is in them. Skipped with -short (it compiles nfpm once,
// then it is cached) or where rpm/dpkg-deb are missing.
package pkgtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func run(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func TestPackages(t *testing.T) {
	if testing.Short() {
		t.Skip("builds packages; skipped with -short")
	}
	for _, tool := range []string{"rpm", "dpkg-deb", "make"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (scripts/setup-deps installs it)", tool)
		}
	}
	root, _ := filepath.Abs("../..")
	dist := t.TempDir()
	run(t, root, "make", "rpm", "deb", "PKG_VERSION=0.1.0", "PKG_ARCH=amd64")
	// make writes into dist/; move them so runs do not mix.
	for _, g := range []string{"rota-agent-0.1.0-1.x86_64.rpm", "rota-agent_0.1.0-1_amd64.deb"} {
		if err := os.Rename(filepath.Join(root, "dist", g), filepath.Join(dist, g)); err != nil {
			t.Fatalf("package %s not built: %v", g, err)
		}
	}
	rpmFile := filepath.Join(dist, "rota-agent-0.1.0-1.x86_64.rpm")
	debFile := filepath.Join(dist, "rota-agent_0.1.0-1_amd64.deb")

	t.Run("rpm files", func(t *testing.T) {
		list := run(t, root, "rpm", "-qpl", rpmFile)
		for _, f := range []string{"/usr/bin/rota-agent", "/usr/lib/systemd/system/rota-agent.service", "/etc/rota/agent.yaml", "/var/lib/rota-agent", "/usr/share/doc/rota-agent/agent.md"} {
			if !containsLine(list, f) {
				t.Errorf("rpm lacks %s:\n%s", f, list)
			}
		}
		// config|noreplace: %config(noreplace) shows as a config file.
		if cfg := run(t, root, "rpm", "-qpc", rpmFile); !containsLine(cfg, "/etc/rota/agent.yaml") {
			t.Errorf("agent.yaml not a config file: %q", cfg)
		}
		dump := run(t, root, "rpm", "-qp", "--dump", rpmFile)
		for _, l := range strings.Split(dump, "\n") {
			// --dump: path size mtime digest mode owner group isconfig isdoc ...
			if f := strings.Fields(l); len(f) > 8 && f[0] == "/etc/rota/agent.yaml" && f[7] != "1" {
				t.Errorf("agent.yaml isconfig = %s", f[7])
			}
		}
		flags := run(t, root, "rpm", "-qp", "--qf", "[%{FILENAMES} %{FILEFLAGS:fflags}\n]", rpmFile)
		if !strings.Contains(flags, "/etc/rota/agent.yaml cn") {
			t.Errorf("agent.yaml not %%config(noreplace):\n%s", flags)
		}
	})
	t.Run("rpm scripts", func(t *testing.T) {
		s := run(t, root, "rpm", "-qp", "--scripts", rpmFile)
		for _, want := range []string{"postinstall scriptlet", "systemctl daemon-reload", "preuninstall scriptlet", "disable --now rota-agent.service"} {
			if !strings.Contains(s, want) {
				t.Errorf("scripts lack %q:\n%s", want, s)
			}
		}
	})
	t.Run("unit", func(t *testing.T) {
		unit, err := os.ReadFile(filepath.Join(root, "packaging/agent/rota-agent.service"))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"Restart=on-failure", "After=munge.service network-online.target", "StateDirectory=rota-agent", "ExecStart=/usr/bin/rota-agent --config /etc/rota/agent.yaml"} {
			if !strings.Contains(string(unit), want) {
				t.Errorf("unit lacks %q", want)
			}
		}
	})
	t.Run("deb", func(t *testing.T) {
		c := run(t, root, "dpkg-deb", "-c", debFile)
		for _, f := range []string{"./usr/bin/rota-agent", "./usr/lib/systemd/system/rota-agent.service", "./etc/rota/agent.yaml", "./var/lib/rota-agent/"} {
			if !strings.Contains(c, f) {
				t.Errorf("deb lacks %s:\n%s", f, c)
			}
		}
		info := run(t, root, "dpkg-deb", "-I", debFile)
		for _, want := range []string{"Package: rota-agent", "Version: 0.1.0-1", "Architecture: amd64", "conffiles", "postinst", "prerm"} {
			if !strings.Contains(info, want) {
				t.Errorf("deb info lacks %q:\n%s", want, info)
			}
		}
		conf := run(t, root, "dpkg-deb", "-f", debFile, "Package")
		if strings.TrimSpace(conf) != "rota-agent" {
			t.Errorf("Package = %q", conf)
		}
	})
}

func containsLine(s, line string) bool {
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) == line {
			return true
		}
	}
	return false
}
