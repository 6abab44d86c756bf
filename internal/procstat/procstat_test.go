package procstat

import (
	"os"
	"testing"
	"time"
)

func TestOwnProcess(t *testing.T) {
	pid := os.Getpid()
	before, err := CPUTime(pid)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Millisecond); time.Now().Before(deadline); {
	}
	after, err := CPUTime(pid)
	if err != nil {
		t.Fatal(err)
	}
	if after <= before {
		t.Fatalf("CPU time did not grow while spinning: %s -> %s", before, after)
	}
	rss, err := RSS(pid)
	if err != nil || rss <= 0 {
		t.Fatalf("RSS = %d, %v", rss, err)
	}
}
