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
// its idle baseline"): two forced collections before the scrape, the live bytes rather than the allocated ones,
// and an error, not a zero, when the process does not export them.
func TestLiveHeapMBCollectsTwiceThenReadsTheLiveBytes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		metrics string
		wantMB  float64
		wantErr string
		wantGCs int32
	}{
		{name: "live bytes", metrics: "go_memstats_heap_alloc_bytes 9437184\ngo_gc_heap_live_bytes 7340032\nkubedeploy_shard_cached_pods 12\n", wantMB: 7, wantGCs: 2},
		{name: "no live bytes", metrics: "go_memstats_heap_alloc_bytes 9437184\n", wantErr: "has no go_gc_heap_live_bytes", wantGCs: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var gcs atomic.Int32
			var scrapedAfter atomic.Int32
			scrapedAfter.Store(-1)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch r.URL.Path {
				case "/debug/pprof/heap":
					if r.URL.Query().Get("gc") != "1" {
						http.Error(w, "no gc", http.StatusBadRequest)
						return
					}
					gcs.Add(1)
				case "/metrics":
					scrapedAfter.Store(gcs.Load())
					fmt.Fprint(w, tc.metrics)
				default:
					http.NotFound(w, r)
				}
			}))
			defer srv.Close()
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
					t.Errorf("live heap = %v MB, want %v (go_gc_heap_live_bytes, not the allocated bytes)", mb, tc.wantMB)
				}
				if v["kubedeploy_shard_cached_pods"] != 12 {
					t.Errorf("values = %v, want the scrape's", v)
				}
			}
			if got := scrapedAfter.Load(); got != tc.wantGCs {
				t.Errorf("scraped after %d forced collections, want %d", got, tc.wantGCs)
			}
		})
	}
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
