package prefault

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

const childEnv = "GITFLEET_PREFAULT_CHILD"

// TestHeapSavesThePageFaultsOfTheAllocationsAfterIt allocates 48 MiB of
// small objects in a fresh process (this test binary run again), with and
// without Heap before, and compares the page faults the allocations take:
// with Heap, the pages they land on are already backed.
func TestHeapSavesThePageFaultsOfTheAllocationsAfterIt(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("prefaulting is done on Linux only")
	}
	faults := func(mode string) int {
		cmd := exec.Command(os.Args[0], "-test.run=^TestChildAllocates$", "-test.v")
		cmd.Env = append(os.Environ(), childEnv+"="+mode)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child %s: %v\n%s", mode, err, out)
		}
		_, after, ok := strings.Cut(string(out), "faults=")
		n, err := strconv.Atoi(strings.Fields(after + " x")[0])
		if !ok || err != nil {
			t.Fatalf("child %s: no fault count in\n%s", mode, out)
		}
		if mode == "with" && !strings.Contains(string(out), "prefaulted=true") {
			t.Skipf("this kernel cannot prefault (MADV_POPULATE_WRITE needs Linux 5.14):\n%s", out)
		}
		return n
	}
	without, with := faults("without"), faults("with")
	t.Logf("page faults while allocating 48 MiB: %d without Heap, %d with", without, with)
	if without < 48<<20/pageSize/2 {
		t.Fatalf("only %d faults without Heap: the child did not allocate fresh memory", without)
	}
	if with*4 > without {
		t.Errorf("%d faults with Heap, %d without: Heap saved less than three quarters of them", with, without)
	}
}

// TestChildAllocates is the child of the test above.
func TestChildAllocates(t *testing.T) {
	mode := os.Getenv(childEnv)
	if mode == "" {
		t.Skip("run by TestHeapSavesThePageFaultsOfTheAllocationsAfterIt")
	}
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	prefaulted := mode == "with" && Heap(64<<20)
	before := minorFaults(t)
	var keep [][]byte
	for range 48 << 20 / pageSize {
		b := make([]byte, pageSize)
		b[0] = 1
		keep = append(keep, b)
	}
	fmt.Printf("prefaulted=%v faults=%d\n", prefaulted, minorFaults(t)-before)
	runtime.KeepAlive(keep)
}

func minorFaults(t *testing.T) int {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return int(ru.Minflt)
}

func TestHeapIgnoresSmallRequests(t *testing.T) {
	if Heap(minBytes - 1) {
		t.Error("Heap did something for less than 16 MiB")
	}
}
