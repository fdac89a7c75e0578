package runfolder

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// holdEnv makes the test binary a holder: it claims the folder named by
// the variable, says "held", and waits for its stdin to close.
const holdEnv = "P2PFAULT_RUNFOLDER_HOLD"

func TestMain(m *testing.M) {
	if dir := os.Getenv(holdEnv); dir != "" {
		if _, err := ClaimDir(dir, testHolder()); err != nil {
			fmt.Println(err)
			os.Exit(2)
		}
		fmt.Println("held")
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// testHolder is this process as a claim names it.
func testHolder() Holder {
	return Holder{Pid: os.Getpid(), StartTicks: 7, Started: time.Now(), Command: "runfolder.test"}
}

// startHolder starts a process that holds dir's lock, and kills it (by
// pid) when the test ends.
func startHolder(t *testing.T, dir string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), holdEnv+"="+dir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	said := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(stdout).ReadString('\n')
		said <- l
	}()
	select {
	case l := <-said:
		if l != "held\n" {
			t.Fatalf("holder said %q, want held", l)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("holder not ready within 30s")
	}
	return cmd
}

// TestClaimNewNeverSharesAFolder: runs that plan the same default folder
// (started in one second) each get one of their own, mode 0700, the first
// the planned name and the next ones -2, -3; each is locked by its run.
func TestClaimNewNeverSharesAFolder(t *testing.T) {
	planned := filepath.Join(t.TempDir(), Root, "20261204-120000-main-none")
	var got []string
	for range 3 {
		c, err := ClaimNew(planned, testHolder())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Release)
		got = append(got, c.Dir)
		st, err := os.Stat(c.Dir)
		if err != nil || st.Mode().Perm() != DirMode {
			t.Errorf("%s: %v, %v; want mode %v", c.Dir, st.Mode().Perm(), err, os.FileMode(DirMode))
		}
		var h Holder
		b, err := os.ReadFile(filepath.Join(c.Dir, LockFile))
		if err != nil || json.Unmarshal(b, &h) != nil || h.Pid != os.Getpid() || h.StartTicks != 7 || h.Command != "runfolder.test" {
			t.Errorf("%s: lock file %q (%v), want the claimant's description", c.Dir, b, err)
		}
	}
	if want := []string{planned, planned + "-2", planned + "-3"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("folders %q, want %q", got, want)
	}
}

// TestClaimDirIsRefusedWhileALiveRunHoldsIt: another process's claim on a
// folder is refused naming its pid (a folder and a row folder alike); once
// that process is SIGKILLed the kernel drops its lock and the folder is
// claimed, a finished run's folder reused as it is.
func TestClaimDirIsRefusedWhileALiveRunHoldsIt(t *testing.T) {
	dir := t.TempDir()
	row := filepath.Join(dir, "main-stall")
	if err := os.WriteFile(filepath.Join(dir, Events), []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	holder := startHolder(t, dir)
	rowHolder := startHolder(t, row)
	for _, tt := range []struct {
		dir string
		cmd *exec.Cmd
	}{{dir, holder}, {row, rowHolder}} {
		_, err := ClaimDir(tt.dir, testHolder())
		var held *HeldError
		if !errors.As(err, &held) || held.Holder.Pid != tt.cmd.Process.Pid {
			t.Fatalf("ClaimDir(%s) = %v, want a HeldError naming pid %d", tt.dir, err, tt.cmd.Process.Pid)
		}
		if want := fmt.Sprintf("%s is in use by p2pfault pid %d (started ", tt.dir, tt.cmd.Process.Pid); !strings.HasPrefix(err.Error(), want) {
			t.Errorf("error %q, want it to start %q", err, want)
		}
	}
	c, err := ClaimNew(dir, testHolder()) // a default name that is taken is skipped, never shared
	if err != nil || c.Dir != dir+"-2" {
		t.Fatalf("ClaimNew(%s) = %v, %v; want %s-2", dir, c, err, dir)
	}
	c.Release()

	if err := syscall.Kill(holder.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = holder.Wait()
	c, err = ClaimDir(dir, testHolder())
	if err != nil {
		t.Fatalf("ClaimDir after the holder's SIGKILL: %v", err)
	}
	if err := c.Lock(row); err == nil {
		t.Errorf("locking the row a live process holds succeeded")
	}
	c.Done()
	if _, err := os.Stat(filepath.Join(dir, Events)); err != nil {
		t.Errorf("Done on a folder it did not make removed what was there: %v", err)
	}
}

// TestDoneLeavesNoFolderOfARunThatWroteNothing: a folder the claim made
// (its rows, and the folders above it made for it, ./p2pfault-runs among
// them) is removed by Done when the run wrote nothing in it, kept when it
// wrote something; a folder that was there before is kept empty.
func TestDoneLeavesNoFolderOfARunThatWroteNothing(t *testing.T) {
	base := t.TempDir()
	fresh := filepath.Join(base, "runs", "fresh")
	c, err := ClaimDir(fresh, testHolder())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Lock(filepath.Join(fresh, "main-stall")); err != nil {
		t.Fatal(err)
	}
	c.Done()
	if _, err := os.Stat(filepath.Join(base, "runs")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused run's new folder (or the one made for it) is left: %v", err)
	}
	if c, err = ClaimNew(filepath.Join(base, Root, "20261204-120000-main-none"), testHolder()); err != nil {
		t.Fatal(err)
	}
	c.Done()
	if _, err := os.Stat(filepath.Join(base, Root)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused run left ./%s: %v", Root, err)
	}

	used := filepath.Join(base, "used")
	if c, err = ClaimNew(used, testHolder()); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(used, Events), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	c.Done()
	if _, err := os.Stat(filepath.Join(used, Events)); err != nil {
		t.Errorf("a run's folder with its events was removed: %v", err)
	}

	if c, err = ClaimDir(base, testHolder()); err != nil {
		t.Fatal(err)
	}
	c.Done()
	if _, err := os.Stat(base); err != nil {
		t.Errorf("a folder that was there before was removed: %v", err)
	}
}
