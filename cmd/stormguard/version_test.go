package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The release mechanism, end to end: a copy of this working tree in a
// repository of its own, whose HEAD is tagged v0.9.9 (never a tag of this
// repository; a v0 tag, since v2 and up need a /vN module path),
// builds a binary whose --version prints the tag, as go install …@v0.9.9
// would; a build with -ldflags "-X main.version=…" prints that version;
// an untagged build does not print a release version. Each build is a go
// build of cmd/stormguard (mostly from the build cache); skipped with
// -short.
func TestVersionFromTag(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command three times; skipped with -short")
	}
	for _, tool := range []string{"git", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found", tool)
		}
	}
	root, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skipf("not in a git checkout: %v", err)
	}
	run := func(dir string, env []string, name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	// A repository of its own holding the working tree as it is (what
	// git would commit, uncommitted changes included).
	top := strings.TrimSpace(string(root))
	clone := filepath.Join(t.TempDir(), "stormguard")
	files := run(top, nil, "git", "ls-files", "--cached", "--others", "--exclude-standard", "-z")
	for _, f := range strings.Split(files, "\x00") {
		data, err := os.ReadFile(filepath.Join(top, f))
		if f == "" || err != nil { // deleted in the working tree
			continue
		}
		dst := filepath.Join(clone, f)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git := []string{"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1", "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com"}
	run(clone, git, "git", "init", "--quiet")
	run(clone, git, "git", "add", "-A")
	run(clone, git, "git", "commit", "--quiet", "-m", "the working tree")
	// The go command stamps the VCS's version only when told to look
	// (-buildvcs, on by default; some environments turn it off).
	build := []string{"GOFLAGS=-buildvcs=true", "GOWORK=off"}
	bin := filepath.Join(t.TempDir(), "stormguard")
	version := func(args ...string) string {
		run(clone, build, "go", append(append([]string{"build", "-o", bin}, args...), "./cmd/stormguard")...)
		return run(clone, nil, bin, "--version")
	}

	if got := version(); regexp.MustCompile(`^stormguard v\d+\.\d+\.\d+ `).MatchString(got) {
		t.Errorf("untagged build: %q; want no release version", got)
	}
	run(clone, git, "git", "tag", "-a", "v0.9.9", "-m", "a test release")
	got := version()
	if !strings.HasPrefix(got, "stormguard v0.9.9 revision ") {
		t.Errorf("build of a commit tagged v0.9.9: %q; want stormguard v0.9.9 revision …", got)
	}
	if got := version("-ldflags", "-X main.version=v1.2.3"); !strings.HasPrefix(got, "stormguard v1.2.3 ") {
		t.Errorf("build with -X main.version=v1.2.3: %q", got)
	}
	t.Logf("tagged build: %s", got)
}
