package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// TestLiveHeapMBCollectsTwiceThenReadsTheLiveBytes checks the shards mode's heap figure (issue 35's "heap above
// its idle baseline"): the metrics scraped first, then two forced collections through the text heap profile, the
// live heap the HeapAlloc of the second profile's MemStats, a reading into which the runtime's own collection came
// tried again, and an error, not a zero, when the profile has no MemStats or every reading is spoiled.
func TestLiveHeapMBCollectsTwiceThenReadsTheLiveBytes(t *testing.T) {
	for _, tc := range []struct {
		name string
		// spoiled is how many readings an automatic collection comes into before one it does not.
		spoiled int
		profile string
		wantMB  float64
		wantErr string
		wantGCs int32
	}{
		{name: "live bytes", profile: memStatsText(7340032), wantMB: 7, wantGCs: 2},
		{name: "spoiled twice", spoiled: 2, profile: memStatsText(7340032), wantMB: 7, wantGCs: 6},
		{name: "always spoiled", spoiled: heapAttempts, profile: memStatsText(7340032), wantErr: "collected on its own during each of 10", wantGCs: 2 * heapAttempts},
		{name: "no MemStats", profile: "heap profile: 0: 0 [0: 0] @ heap/0\n", wantErr: "has no MemStats HeapAlloc", wantGCs: 1},
		{name: "not a number", profile: "# runtime.MemStats\n# HeapAlloc = 7e6\n", wantErr: `HeapAlloc is "7e6", not a number`, wantGCs: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, gcs, scrapedAfter := fakeHeapServer(t, tc.profile, tc.spoiled)
			v, mb, err := liveHeapMB(context.Background(), srv.Client(), srv.URL+"/metrics")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one saying %q", err, tc.wantErr)
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				if mb != tc.wantMB {
					t.Errorf("live heap = %v MB, want %v (the second profile's HeapAlloc)", mb, tc.wantMB)
				}
				if v["kubedeploy_shard_cached_pods"] != 12 {
					t.Errorf("values = %v, want the scrape's", v)
				}
			}
			if got := gcs.Load(); got != tc.wantGCs {
				t.Errorf("%d forced collections, want %d", got, tc.wantGCs)
			}
			if got := scrapedAfter.Load(); got != 0 {
				t.Errorf("scraped after %d forced collections, want before them (what the scrape allocates is collected)", got)
			}
		})
	}
}

// memStatsText is the end of a text heap profile: MemStats with heapAlloc bytes, 40 collections, all forced.
func memStatsText(heapAlloc int) string {
	return fmt.Sprintf("heap profile: 0: 0 [0: 0] @ heap/0\n\n# runtime.MemStats\n# Alloc = %d\n# HeapAlloc = %d\n# NumGC = 40\n# NumForcedGC = 40\n# DebugGC = false\n", heapAlloc, heapAlloc)
}

// fakeHeapServer serves /metrics and /debug/pprof/heap?gc=1&debug=1 (counting gcs): profile, its automatic
// collections moved between the two profiles of each of the first spoiled readings when profile is
// memStatsText's; it records after how many forced collections the last scrape came.
func fakeHeapServer(t *testing.T, profile string, spoiled int) (*httptest.Server, *atomic.Int32, *atomic.Int32) {
	var gcs, scrapedAfter atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/debug/pprof/heap":
			if r.URL.Query().Get("gc") != "1" || r.URL.Query().Get("debug") != "1" {
				http.Error(w, "want gc=1&debug=1", http.StatusBadRequest)
				return
			}
			n := int(gcs.Add(1))
			auto := 0
			if reading := (n - 1) / 2; reading < spoiled && n%2 == 0 {
				auto = 1
			}
			fmt.Fprint(w, strings.Replace(profile, "# NumGC = 40\n", fmt.Sprintf("# NumGC = %d\n", 40+auto), 1))
		case "/metrics":
			scrapedAfter.Store(gcs.Load())
			fmt.Fprint(w, "go_gc_heap_live_bytes 9437184\nkubedeploy_shard_cached_pods 12\n")
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &gcs, &scrapedAfter
}

// TestOneSetEachWantsEveryReplica: a sharded side is measured only when every replica runs one set of
// controllers; one merging (0) or not merged yet (2) holds it, whatever the others run.
func TestOneSetEachWantsEveryReplica(t *testing.T) {
	for sets, want := range map[string]bool{"1/1/1": true, "1": true, "1/0/1": false, "2/1/1": false, "0": false, "1/1/4": false} {
		if got := oneSetEach(sets); got != want {
			t.Errorf("oneSetEach(%q) = %v, want %v", sets, got, want)
		}
	}
}

// TestHeapProfileOffKeepsTheBenchsGODEBUG: a measured process runs with heap profiling off, after whatever GODEBUG
// the bench itself was given.
func TestHeapProfileOffKeepsTheBenchsGODEBUG(t *testing.T) {
	t.Setenv("GODEBUG", "")
	if got := heapProfileOff(); got != "GODEBUG=memprofilerate=0" {
		t.Errorf("without GODEBUG: %q", got)
	}
	t.Setenv("GODEBUG", "gctrace=1")
	if got := heapProfileOff(); got != "GODEBUG=gctrace=1,memprofilerate=0" {
		t.Errorf("with GODEBUG=gctrace=1: %q", got)
	}
}
