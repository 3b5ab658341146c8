package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// A Stage is a copy of the repository that gremlins may run in. gremlins
// copies the module root of a target once per worker into a temporary
// directory and mutates that copy; two of its assumptions do not hold in
// the repository itself, so the stage is the repository with them made true:
//
//   - A relative replace directive (packer/go.mod: hotpath => ../) points
//     nowhere from gremlins' copy of the packer module. In the stage every
//     relative replace is made absolute, to the stage's own copy.
//   - gremlins names the package to test after the directory: it walks up
//     from a file's directory until the path ends with the package name, and
//     tests the module root when none does. kernel-config holds package
//     kernelconfig, so every mutant of it would run the tests of a package
//     with no Go files (exit 1, "KILLED"): a perfect score that means
//     nothing. In the stage such a directory is renamed to its package name
//     and every import of it rewritten; the report maps paths back.
//
// The copy holds what git knows of (tracked files and untracked ones that
// are not ignored), so out/, with images of hundreds of MB, is not copied
// once per worker, and uncommitted edits are mutated as they are.
type Stage struct {
	// Root is the directory of the copy.
	Root string
	// renames are the directories renamed in the copy, deepest first.
	renames []rename
}

// rename is one directory renamed in the stage, both slash paths relative
// to the root.
type rename struct{ repo, stage string }

// NewStage copies the files git lists in repo to dst (which must not exist
// or be empty) and makes the relative replace directives of every go.mod in
// it absolute.
func NewStage(repo, dst string) (*Stage, error) {
	files, err := gitFiles(repo)
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		if err := copyFile(filepath.Join(repo, f), filepath.Join(dst, f)); err != nil {
			return nil, fmt.Errorf("stage: %w", err)
		}
	}
	s := &Stage{Root: dst}
	if err := s.absoluteReplaces(); err != nil {
		return nil, err
	}
	return s, nil
}

// gitFiles lists the files of the work tree of repo that git tracks or
// would track (slash paths), leaving out tracked files deleted from the
// work tree.
func gitFiles(repo string) ([]string, error) {
	cmd := exec.Command("git", "-C", repo, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("stage: git ls-files in %s: %w: %s", repo, err, strings.TrimSpace(stderr.String()))
	}
	var files []string
	for _, f := range strings.Split(string(out), "\x00") {
		if f == "" {
			continue
		}
		if fi, err := os.Lstat(filepath.Join(repo, f)); err != nil || !fi.Mode().IsRegular() {
			continue // deleted, or a symlink or submodule: nothing to mutate
		}
		files = append(files, f)
	}
	sort.Strings(files)
	return files, nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, fi.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// goModEdit is the part of `go mod edit -json` the stage reads.
type goModEdit struct {
	Module  struct{ Path string }
	Replace []struct {
		Old struct{ Path, Version string }
		New struct{ Path, Version string }
	}
}

func readGoMod(file string) (goModEdit, error) {
	var m goModEdit
	out, err := exec.Command("go", "mod", "edit", "-json", file).Output()
	if err != nil {
		return m, fmt.Errorf("go mod edit -json %s: %w", file, err)
	}
	if err := json.Unmarshal(out, &m); err != nil {
		return m, fmt.Errorf("go mod edit -json %s: %w", file, err)
	}
	return m, nil
}

// absoluteReplaces rewrites every replace directive whose target is a
// relative directory to the absolute directory in the stage.
func (s *Stage) absoluteReplaces() error {
	return filepath.WalkDir(s.Root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "go.mod" {
			return err
		}
		m, err := readGoMod(p)
		if err != nil {
			return fmt.Errorf("stage: %w", err)
		}
		for _, r := range m.Replace {
			if r.New.Version != "" || !(strings.HasPrefix(r.New.Path, "./") || strings.HasPrefix(r.New.Path, "../")) {
				continue
			}
			old := r.Old.Path
			if r.Old.Version != "" {
				old += "@" + r.Old.Version
			}
			abs := filepath.Join(filepath.Dir(p), filepath.FromSlash(r.New.Path))
			if out, err := exec.Command("go", "mod", "edit", "-replace", old+"="+abs, p).CombinedOutput(); err != nil {
				return fmt.Errorf("stage: make the replace of %s in %s absolute: %w: %s", old, p, err, out)
			}
		}
		return nil
	})
}

// packageClause matches the package clause of a Go file.
var packageClause = regexp.MustCompile(`^package\s+([A-Za-z_][A-Za-z0-9_]*)`)

// packageName is the package of the non-test Go files of dir ("" when it
// has none).
func packageName(dir string) (string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return "", err
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		name, err := fileClause(f)
		if err != nil {
			return "", err
		}
		if name != "" {
			return name, nil
		}
	}
	return "", nil
}

func fileClause(file string) (string, error) {
	f, err := os.Open(file)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := packageClause.FindStringSubmatch(sc.Text()); m != nil {
			return m[1], nil
		}
	}
	return "", sc.Err()
}

// packageDirs lists the directories of t (slash paths relative to the
// root) that hold a package gremlins will mutate, deepest first.
func (s *Stage) packageDirs(t Target) ([]string, error) {
	dirs := []string{t.Dir}
	if t.Recursive {
		dirs = nil
		err := filepath.WalkDir(filepath.Join(s.Root, filepath.FromSlash(t.Dir)), func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return err
			}
			if d.Name() == "testdata" {
				return filepath.SkipDir
			}
			rel, err := filepath.Rel(s.Root, p)
			dirs = append(dirs, filepath.ToSlash(rel))
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	sort.Slice(dirs, func(i, j int) bool { return strings.Count(dirs[i], "/") > strings.Count(dirs[j], "/") })
	return dirs, nil
}

// Prepare makes the directories of t follow gremlins' naming rule (see
// Stage) and returns the directory in the stage to run gremlins on.
func (s *Stage) Prepare(t Target) (string, error) {
	dirs, err := s.packageDirs(t)
	if err != nil {
		return "", fmt.Errorf("stage %s: %w", t.Name(), err)
	}
	for _, d := range dirs {
		sd := s.StagePath(d)
		name, err := packageName(filepath.Join(s.Root, filepath.FromSlash(sd)))
		if err != nil {
			return "", fmt.Errorf("stage %s: %w", t.Name(), err)
		}
		if name == "" || strings.HasSuffix(sd, name) {
			continue
		}
		if err := s.renameDir(sd, path.Join(path.Dir(sd), name)); err != nil {
			return "", fmt.Errorf("stage %s: %w", t.Name(), err)
		}
	}
	return filepath.Join(s.Root, filepath.FromSlash(s.StagePath(t.Dir))), nil
}

// renameDir renames the directory from to to (slash paths relative to the
// root) and rewrites the import paths that name it in every Go file.
func (s *Stage) renameDir(from, to string) error {
	if _, err := os.Stat(filepath.Join(s.Root, filepath.FromSlash(to))); err == nil {
		return fmt.Errorf("cannot rename %s to %s, the name of its package: %s exists", from, to, to)
	}
	modDir, mod, err := s.module(from)
	if err != nil {
		return err
	}
	relFrom, _ := filepath.Rel(modDir, filepath.Join(s.Root, filepath.FromSlash(from)))
	relTo, _ := filepath.Rel(modDir, filepath.Join(s.Root, filepath.FromSlash(to)))
	oldImport := mod + "/" + filepath.ToSlash(relFrom)
	newImport := mod + "/" + filepath.ToSlash(relTo)
	if err := os.Rename(filepath.Join(s.Root, filepath.FromSlash(from)), filepath.Join(s.Root, filepath.FromSlash(to))); err != nil {
		return err
	}
	s.renames = append(s.renames, rename{repo: s.RepoPath(from), stage: to})
	return filepath.WalkDir(s.Root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") {
			return err
		}
		return rewriteImport(p, oldImport, newImport)
	})
}

// rewriteImport replaces the quoted import path old (and the paths below
// it) by new in file, keeping every line where it is.
func rewriteImport(file, old, new string) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	nb := bytes.ReplaceAll(b, []byte(`"`+old+`"`), []byte(`"`+new+`"`))
	nb = bytes.ReplaceAll(nb, []byte(`"`+old+`/`), []byte(`"`+new+`/`))
	if bytes.Equal(b, nb) {
		return nil
	}
	return os.WriteFile(file, nb, 0o644)
}

// module finds the module that holds dir (a slash path relative to the
// root): its directory and path.
func (s *Stage) module(dir string) (string, string, error) {
	d := filepath.Join(s.Root, filepath.FromSlash(dir))
	for {
		gm := filepath.Join(d, "go.mod")
		if _, err := os.Stat(gm); err == nil {
			m, err := readGoMod(gm)
			return d, m.Module.Path, err
		}
		if d == s.Root || filepath.Dir(d) == d {
			return "", "", errors.New("no go.mod above " + dir)
		}
		d = filepath.Dir(d)
	}
}

// StagePath is where the repository path p (slash, relative) is in the
// stage. The renames are applied in the order they were made, deepest
// first, so a directory renamed below another renamed one is found.
func (s *Stage) StagePath(p string) string {
	for _, r := range s.renames {
		if rest, ok := underDir(p, r.repo); ok {
			p = r.stage + rest
		}
	}
	return p
}

// RepoPath is the repository path of the stage path p (slash, relative):
// StagePath undone, in the reverse order.
func (s *Stage) RepoPath(p string) string {
	for i := len(s.renames) - 1; i >= 0; i-- {
		r := s.renames[i]
		if rest, ok := underDir(p, r.stage); ok {
			p = r.repo + rest
		}
	}
	return p
}

// underDir reports whether p is dir or below it, and what follows dir.
func underDir(p, dir string) (string, bool) {
	if p == dir {
		return "", true
	}
	if strings.HasPrefix(p, dir+"/") {
		return p[len(dir):], true
	}
	return "", false
}

// generatedHeader is the line that marks a generated Go file (go help
// generate: "^// Code generated .* DO NOT EDIT\.$").
var generatedHeader = regexp.MustCompile(`^// Code generated .* DO NOT EDIT\.$`)

// Generated lists the generated Go files gremlins would mutate for t,
// relative to the directory gremlins runs on (packer's *.hcl2spec.go:
// a mutant there says nothing of our tests, and packer-generate-check
// already checks them).
func (s *Stage) Generated(t Target) ([]string, error) {
	base := filepath.Join(s.Root, filepath.FromSlash(s.StagePath(t.Dir)))
	var gen []string
	err := filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return err
		}
		g, err := isGenerated(p)
		if err != nil || !g {
			return err
		}
		rel, err := filepath.Rel(base, p)
		gen = append(gen, filepath.ToSlash(rel))
		return err
	})
	return gen, err
}

func isGenerated(file string) (bool, error) {
	f, err := os.Open(file)
	if err != nil {
		return false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if generatedHeader.MatchString(line) {
			return true, nil
		}
		if packageClause.MatchString(line) {
			return false, nil // the header comes before the package clause
		}
	}
	return false, sc.Err()
}
