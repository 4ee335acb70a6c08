package controlplane

import (
	"fmt"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

func ipPod(uid, ip string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid)}, Status: corev1.PodStatus{PodIP: ip}}
}

func mustPodIP(t *testing.T, p *podIPs, uid string) string {
	t.Helper()
	ip, err := p.podIPWith("kwok-node-0", false, uid, "", "")
	if err != nil {
		t.Fatalf("pod %s: %v", uid, err)
	}
	return ip
}

// Many stage workers at once, on a fresh allocator: every pod gets its own address (KWOK v0.8.0's pool, created
// on first use with a Load and a Store, could give two of them the same one), and a pod asking again gets the
// address it has.
func TestPodIPsConcurrentFirstUse(t *testing.T) {
	p, err := newPodIPs(podCIDR)
	if err != nil {
		t.Fatal(err)
	}
	const workers, each = 8, 200
	var mu sync.Mutex
	seen := map[string]string{}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				uid := fmt.Sprintf("w%d-%d", w, i)
				ip := mustPodIP(t, p, uid)
				mu.Lock()
				if other, dup := seen[ip]; dup {
					t.Errorf("%s given to %s and %s", ip, other, uid)
				}
				seen[ip] = uid
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(seen) != workers*each {
		t.Fatalf("%d addresses for %d pods", len(seen), workers*each)
	}
	if again := mustPodIP(t, p, "w3-7"); seen[again] != "w3-7" {
		t.Errorf("pod w3-7 asked again and got %s, held by %s", again, seen[again])
	}
}

// After a restart the watch has seen the running pods: a new pod gets none of their addresses (KWOK v0.8.0
// gave 6 new pods the 6 addresses of the 6 running ones), and a deleted pod's address is free again.
func TestPodIPsSkipsRunningPodsAndFreesDeleted(t *testing.T) {
	p, err := newPodIPs(podCIDR)
	if err != nil {
		t.Fatal(err)
	}
	p.onPod(ipPod("old-1", "10.244.0.1"), false)
	p.onPod(ipPod("old-2", "10.244.0.2"), false)
	p.onPod(ipPod("other", "10.244.0.2"), false) // a duplicate from before: the address stays old-2's
	if ip := mustPodIP(t, p, "new-1"); ip != "10.244.0.3" {
		t.Errorf("new pod got %s, want 10.244.0.3 (10.244.0.1 and .2 are running pods')", ip)
	}
	p.onPod(cache.DeletedFinalStateUnknown{Obj: ipPod("old-1", "10.244.0.1")}, true)
	p.onPod(ipPod("other", "10.244.0.2"), true) // frees nothing: it never held .2
	if n := p.held(); n != 2 {
		t.Errorf("%d addresses held, want 2 (old-2, new-1)", n)
	}
	hostNet := ipPod("host", "10.1.0.1")
	hostNet.Spec.HostNetwork = true
	p.onPod(hostNet, false)
	if ip, _ := p.podIPWith("kwok-node-0", true, "host", "", ""); ip != nodeIP {
		t.Errorf("host-network pod got %s, want the node's %s", ip, nodeIP)
	}
}

// A small prefix: the search wraps past the last usable address, never hands out the network or broadcast
// address, reuses a freed one, and says so when every address is held.
func TestPodIPsWrapsAndRunsOut(t *testing.T) {
	p, err := newPodIPs("10.9.0.0/29") // .1 … .6 usable
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 6; i++ {
		if ip := mustPodIP(t, p, fmt.Sprint(i)); ip != fmt.Sprintf("10.9.0.%d", i) {
			t.Fatalf("pod %d got %s", i, ip)
		}
	}
	if ip, err := p.podIPWith("", false, "7", "", ""); err == nil {
		t.Fatalf("a 7th pod got %s from 6 usable addresses", ip)
	} else if want := "no free pod IP in 10.9.0.0/29: 6 held"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	p.release(ipPod("3", ""))
	if ip := mustPodIP(t, p, "8"); ip != "10.9.0.3" {
		t.Errorf("after .3 was freed a pod got %s", ip)
	}
	for _, bad := range []string{"10.9.0.0/31", "not-a-cidr"} {
		if _, err := newPodIPs(bad); err == nil {
			t.Errorf("newPodIPs(%q) accepted", bad)
		}
	}
}
