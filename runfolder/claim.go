package runfolder

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// LockFile is the lock a run holds on its folder for its whole life
// (flock(2), which the kernel drops when the holder dies, however it dies).
// It holds the holder's pid and start time, so a run refused the folder
// can say who has it. It stays in the folder after the run: a later run
// takes the same lock.
const LockFile = "p2pfault.lock"

// DirMode is the mode of the folders a run makes: the records in them say
// what cleanup undoes, so no other user may write there.
const DirMode = 0o700

// maxSuffix bounds the search for a free default folder name (a clash
// needs that many runs started in one second).
const maxSuffix = 1000

// Holder is the run that holds a folder's lock, as its lock file says:
// the claimant describes itself (runfolder knows paths, not processes).
type Holder struct {
	Pid        int       `json:"pid"`
	StartTicks uint64    `json:"start_ticks"`
	Started    time.Time `json:"started"`
	Command    string    `json:"command"`
}

// HeldError is a folder another live run holds.
type HeldError struct {
	Dir    string
	Holder Holder // zero when its lock file does not say (yet)
}

func (e *HeldError) Error() string {
	who := "another p2pfault run"
	if h := e.Holder; h.Pid > 0 {
		who = fmt.Sprintf("p2pfault pid %d (started %s", h.Pid, h.Started.Local().Format("2006-01-02 15:04:05"))
		if h.Command != "" {
			who += ": " + h.Command
		}
		who += ")"
	}
	return fmt.Sprintf("%s is in use by %s, which holds %s: give another --out, or wait for that run to end", e.Dir, who, filepath.Join(e.Dir, LockFile))
}

// Claim is a run's hold on its folder and on the row folders in it: the
// locks, kept until Release (or the process's end).
type Claim struct {
	Dir     string   // the run's folder
	created bool     // Claim made Dir: Done removes it if the run left it empty
	parents []string // folders above Dir the claim made, outermost first
	holder  Holder   // written into each lock file
	locks   []*os.File
}

// ClaimNew makes a fresh folder for a run whose --out was not given:
// planned (a Default name) if no other run has it, else planned-2,
// planned-3, ... Each is created exclusively (mkdir fails on one that
// exists), so two runs started in the same second never share a folder.
// The new folder has mode DirMode and is locked, its lock file naming h.
func ClaimNew(planned string, h Holder) (*Claim, error) {
	parents, err := mkdirAll(filepath.Dir(planned))
	if err != nil {
		return nil, fmt.Errorf("create output folder %s: %w", filepath.Dir(planned), err)
	}
	for n := 1; n <= maxSuffix; n++ {
		dir := planned
		if n > 1 {
			dir = planned + "-" + strconv.Itoa(n)
		}
		err := os.Mkdir(dir, DirMode)
		if errors.Is(err, fs.ErrExist) {
			continue // another run's (of this second)
		}
		if err != nil {
			return nil, fmt.Errorf("create output folder %s: %w", dir, err)
		}
		c := &Claim{Dir: dir, created: true, parents: parents, holder: h}
		if err := c.Lock(dir); err != nil {
			c.Done()
			return nil, err
		}
		return c, nil
	}
	removeEmpty(parents)
	return nil, fmt.Errorf("create output folder %s: %s to %s-%d exist already", planned, planned, planned, maxSuffix)
}

// ClaimDir takes the folder a run's --out names: made (mode DirMode) if it
// is missing, reused if a finished run left it, refused with a *HeldError
// naming the holder if a live run holds it. Its lock file names h.
func ClaimDir(dir string, h Holder) (*Claim, error) {
	made, err := mkdirAll(dir)
	if err != nil {
		return nil, fmt.Errorf("create output folder %s: %w", dir, err)
	}
	c := &Claim{Dir: dir, holder: h}
	if n := len(made); n > 0 { // the last one made is dir itself
		c.created, c.parents = true, made[:n-1]
	}
	if err := c.Lock(dir); err != nil {
		c.Done()
		return nil, err
	}
	return c, nil
}

// mkdirAll is os.MkdirAll with mode DirMode that returns the folders it
// made, outermost first.
func mkdirAll(dir string) ([]string, error) {
	var missing []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); !errors.Is(err, fs.ErrNotExist) {
			break
		}
		missing = append([]string{d}, missing...)
		if filepath.Dir(d) == d {
			break
		}
	}
	if err := os.MkdirAll(dir, DirMode); err != nil {
		return nil, err
	}
	return missing, nil
}

// removeEmpty removes the folders dirs, innermost first, each only if
// empty.
func removeEmpty(dirs []string) {
	for i := len(dirs) - 1; i >= 0; i-- {
		_ = os.Remove(dirs[i])
	}
}

// Lock makes dir if missing and takes its lock for the claim's run: the
// run's own folder, or a row folder in it (a slice's row or a several-arm
// run's arm, each also a run folder another run could be given as --out).
func (c *Claim) Lock(dir string) error {
	for _, f := range c.locks {
		if filepath.Dir(f.Name()) == filepath.Clean(dir) {
			return nil // a one-arm run's arm folder is the run's own
		}
	}
	if err := os.MkdirAll(dir, DirMode); err != nil {
		return fmt.Errorf("create output folder %s: %w", dir, err)
	}
	f, err := lock(dir, c.holder)
	if err != nil {
		return err
	}
	c.locks = append(c.locks, f)
	return nil
}

// Release drops every lock of the claim; the folders stay.
func (c *Claim) Release() {
	for _, f := range c.locks {
		_ = f.Close() // closing the last descriptor drops the flock
	}
	c.locks = nil
}

// Done ends the claim at the run's end, however it ends: a folder the
// claim made that the run left empty (a usage error after the claim, so
// nothing was written) is removed again, rows first, so a refused run
// leaves no folder behind; any other folder stays, lock file and all.
// Each lock file is unlinked while still held, so no other run can lock a
// file that is then removed under it.
func (c *Claim) Done() {
	if c.created {
		for i := len(c.locks) - 1; i >= 0; i-- { // rows before the run's folder
			dir := filepath.Dir(c.locks[i].Name())
			if onlyLock(dir) {
				_ = os.Remove(filepath.Join(dir, LockFile))
				_ = os.Remove(dir) // fails on a folder something was written to meanwhile
			}
		}
		removeEmpty(c.parents) // ./p2pfault-runs made for this run alone
	}
	c.Release()
}

// onlyLock reports whether dir holds nothing but its lock file.
func onlyLock(dir string) bool {
	names, err := os.ReadDir(dir)
	return err == nil && len(names) == 1 && names[0].Name() == LockFile
}

// lock takes dir's lock file without waiting and writes h into it. A lock file removed and made again between open and flock
// (Done's) is opened again, so two runs never lock two files.
func lock(dir string, h Holder) (*os.File, error) {
	path := filepath.Join(dir, LockFile)
	for range 3 {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
		if err != nil {
			return nil, fmt.Errorf("lock output folder %s: %w", dir, err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			_ = f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				return nil, &HeldError{Dir: dir, Holder: readHolder(path)}
			}
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if !samePath(f, path) {
			_ = f.Close()
			continue
		}
		if err := writeHolder(f, h); err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("write %s: %w", path, err)
		}
		return f, nil
	}
	return nil, fmt.Errorf("lock %s: the file keeps being replaced", path)
}

func samePath(f *os.File, path string) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Lstat(path)
	return err == nil && os.SameFile(a, b)
}

func writeHolder(f *os.File, h Holder) error {
	b, err := json.Marshal(h)
	if err != nil {
		return err
	}
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err = f.WriteAt(append(b, '\n'), 0)
	return err
}

// readHolder reads a held lock file; a holder that has not written it yet
// (it locks, then writes) is given a moment.
func readHolder(path string) Holder {
	var h Holder
	for range 5 {
		if b, err := os.ReadFile(path); err == nil && json.Unmarshal(b, &h) == nil && h.Pid > 0 {
			return h
		}
		time.Sleep(20 * time.Millisecond)
	}
	return Holder{}
}
