package ownership

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
)

var rsKind = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "ReplicaSet"}

func owner(deleting bool) *metav1.ObjectMeta {
	o := &metav1.ObjectMeta{Name: "rs", Namespace: "ns", UID: "owner-uid"}
	if deleting {
		o.DeletionTimestamp = &metav1.Time{}
	}
	return o
}

func pod(name string, lbl string, ctrlUID types.UID, mods ...func(*v1.Pod)) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name), Labels: map[string]string{"app": lbl}}}
	if ctrlUID != "" {
		yes := true
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "x", UID: ctrlUID, Controller: &yes}}
	}
	for _, m := range mods {
		m(p)
	}
	return p
}

var notFound = apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "x")

// claimCase is one case of TestClaim: the owner's state, the objects
// claimed, what the patches and CanAdopt return, and the outcome wanted.
type claimCase struct {
	name          string
	ownerDeleting bool
	objs          []*v1.Pod
	patchErr      error
	canAdoptErr   error
	wantClaimed   []string
	wantPatches   int
	wantCanAdopt  int
	wantErr       string
}

// claimCases are TestClaim's cases.
func claimCases() []claimCase {
	deleting := func(p *v1.Pod) { p.DeletionTimestamp = &metav1.Time{} }
	otherNS := func(p *v1.Pod) { p.Namespace = "other" }
	nonController := func(p *v1.Pod) { p.OwnerReferences = []metav1.OwnerReference{{Kind: "Node", Name: "n", UID: "n"}} }
	return []claimCase{
		{name: "other controller ignored", objs: []*v1.Pod{pod("a", "web", "other")}},
		{name: "ours and matching claimed without a write", objs: []*v1.Pod{pod("a", "web", "owner-uid")}, wantClaimed: []string{"a"}},
		{name: "ours and matching claimed while owner deleting", ownerDeleting: true, objs: []*v1.Pod{pod("a", "web", "owner-uid")}, wantClaimed: []string{"a"}},
		{name: "ours but not matching is released", objs: []*v1.Pod{pod("a", "db", "owner-uid")}, wantPatches: 1},
		{name: "release NotFound is success", objs: []*v1.Pod{pod("a", "db", "owner-uid")}, patchErr: notFound, wantPatches: 1},
		{name: "release Invalid is success", objs: []*v1.Pod{pod("a", "db", "owner-uid")}, patchErr: apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "a", nil), wantPatches: 1},
		{name: "release other error aggregated", objs: []*v1.Pod{pod("a", "db", "owner-uid")}, patchErr: errors.New("boom"), wantPatches: 1, wantErr: "boom"},
		{name: "ours not matching, owner deleting: no write", ownerDeleting: true, objs: []*v1.Pod{pod("a", "db", "owner-uid")}},
		{name: "orphan adopted", objs: []*v1.Pod{pod("a", "web", "")}, wantClaimed: []string{"a"}, wantPatches: 1, wantCanAdopt: 1},
		{name: "non-controller ref still an orphan", objs: []*v1.Pod{pod("a", "web", "", nonController)}, wantClaimed: []string{"a"}, wantPatches: 1, wantCanAdopt: 1},
		{name: "orphan ignored while owner deleting", ownerDeleting: true, objs: []*v1.Pod{pod("a", "web", "")}},
		{name: "orphan not matching ignored", objs: []*v1.Pod{pod("a", "db", "")}},
		{name: "terminating orphan ignored", objs: []*v1.Pod{pod("a", "web", "", deleting)}},
		{name: "orphan in another namespace ignored", objs: []*v1.Pod{pod("a", "web", "", otherNS)}},
		{name: "adopt NotFound ignored", objs: []*v1.Pod{pod("a", "web", "")}, patchErr: notFound, wantPatches: 1, wantCanAdopt: 1},
		{name: "adopt error aggregated", objs: []*v1.Pod{pod("a", "web", "")}, patchErr: errors.New("boom"), wantPatches: 1, wantCanAdopt: 1, wantErr: "boom"},
		{
			name: "AD-3 CanAdopt runs once and fails every adoption", objs: []*v1.Pod{pod("a", "web", ""), pod("b", "web", "")},
			canAdoptErr: errors.New("gone"), wantCanAdopt: 1, wantErr: "can't adopt Pod ns/a (uid-a): gone",
		},
		{
			name: "AD-3 CanAdopt NotFound is still an error", objs: []*v1.Pod{pod("a", "web", "")},
			canAdoptErr: notFound, wantCanAdopt: 1, wantErr: "can't adopt Pod ns/a",
		},
	}
}

// TestClaim covers AD-1 (every branch), AD-3 (memoized CanAdopt) and AD-5.
func TestClaim(t *testing.T) {
	for _, tc := range claimCases() {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			patches, canAdopts := 0, 0
			c := &Claimer[*v1.Pod]{
				Owner: owner(tc.ownerDeleting), OwnerKind: rsKind, ObjectKind: "Pod",
				Selector: labels.SelectorFromSet(labels.Set{"app": "web"}),
				CanAdopt: func(context.Context) error { canAdopts++; return tc.canAdoptErr },
				Patch: func(_ context.Context, p *v1.Pod, _ []byte) (*v1.Pod, error) {
					patches++
					return p, tc.patchErr
				},
			}
			claimed, err := c.Claim(ctx, tc.objs)
			var names []string
			for _, p := range claimed {
				names = append(names, p.Name)
			}
			if strings.Join(names, ",") != strings.Join(tc.wantClaimed, ",") {
				t.Errorf("claimed = %v, want %v", names, tc.wantClaimed)
			}
			if patches != tc.wantPatches || canAdopts != tc.wantCanAdopt {
				t.Errorf("patches = %d, CanAdopt calls = %d; want %d, %d", patches, canAdopts, tc.wantPatches, tc.wantCanAdopt)
			}
			if (err != nil) != (tc.wantErr != "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// TestClaimReturnsPatchedObjects: an adopted object is the one the API
// server returned from the adopt patch, with its new resourceVersion, so the
// rest of the sync writes with it (IM-2); unpatched objects are returned as
// passed in.
func TestClaimReturnsPatchedObjects(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	orphan, owned := pod("orphan", "web", ""), pod("owned", "web", "owner-uid")
	orphan.ResourceVersion, owned.ResourceVersion = "10", "11"
	c := &Claimer[*v1.Pod]{
		Owner: owner(false), OwnerKind: rsKind, ObjectKind: "Pod",
		Selector: labels.SelectorFromSet(labels.Set{"app": "web"}),
		Patch: func(_ context.Context, p *v1.Pod, _ []byte) (*v1.Pod, error) {
			patched := p.DeepCopy()
			patched.ResourceVersion = "12"
			patched.OwnerReferences = []metav1.OwnerReference{*NewControllerRef(owner(false), rsKind)}
			return patched, nil
		},
	}
	claimed, err := c.Claim(ctx, []*v1.Pod{orphan, owned})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, p := range claimed {
		got[p.Name] = p.ResourceVersion
	}
	if got["orphan"] != "12" || got["owned"] != "11" {
		t.Fatalf("claimed resourceVersions = %v, want orphan 12 (patched) and owned 11 (as passed)", got)
	}
	if orphan.ResourceVersion != "10" {
		t.Fatal("the cached object was modified")
	}
}

// TestRecheckDeletionTimestamp covers AD-3's messages.
func TestRecheckDeletionTimestamp(t *testing.T) {
	o := owner(false)
	cases := []struct {
		name    string
		fresh   metav1.Object
		err     error
		wantErr string
	}{
		{"same object", &metav1.ObjectMeta{UID: "owner-uid"}, nil, ""},
		{"GET fails", nil, errors.New("timeout"), "can't recheck DeletionTimestamp: timeout"},
		{"UID changed", &metav1.ObjectMeta{UID: "new"}, nil, "original ReplicaSet ns/rs is gone: got uid new, wanted owner-uid"},
		{"being deleted", &metav1.ObjectMeta{UID: "owner-uid", DeletionTimestamp: &metav1.Time{}}, nil, "ns/rs has just been deleted at"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			check := RecheckDeletionTimestamp(o, "ReplicaSet", func(context.Context) (metav1.Object, error) { return tc.fresh, tc.err })
			err := check(context.Background())
			if (err != nil) != (tc.wantErr != "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// TestPatches checks the AD-4 and AD-5 patch bodies structurally.
func TestPatches(t *testing.T) {
	adopt, err := AdoptPatch(NewControllerRef(owner(false), rsKind), "obj-uid")
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Metadata struct {
			UID             string           `json:"uid"`
			OwnerReferences []map[string]any `json:"ownerReferences"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(adopt, &got); err != nil {
		t.Fatal(err)
	}
	ref := got.Metadata.OwnerReferences
	if got.Metadata.UID != "obj-uid" || len(ref) != 1 || ref[0]["apiVersion"] != "apps/v1" || ref[0]["kind"] != "ReplicaSet" ||
		ref[0]["name"] != "rs" || ref[0]["uid"] != "owner-uid" || ref[0]["controller"] != true || ref[0]["blockOwnerDeletion"] != true {
		t.Errorf("adopt patch = %s", adopt)
	}
	release, err := ReleasePatch("owner-uid", "obj-uid")
	if err != nil {
		t.Fatal(err)
	}
	got.Metadata.OwnerReferences = nil // json.Unmarshal would merge into the old maps
	if err := json.Unmarshal(release, &got); err != nil {
		t.Fatal(err)
	}
	ref = got.Metadata.OwnerReferences
	if got.Metadata.UID != "obj-uid" || len(ref) != 1 || ref[0]["$patch"] != "delete" || ref[0]["uid"] != "owner-uid" || len(ref[0]) != 2 {
		t.Errorf("release patch = %s", release)
	}
}

// TestControllerIndex covers ByController and Orphans (RS-4 candidates).
func TestControllerIndex(t *testing.T) {
	informer := cache.NewSharedIndexInformer(&cache.ListWatch{}, &v1.Pod{}, 0, cache.Indexers{})
	if err := AddControllerIndex(informer); err != nil {
		t.Fatal(err)
	}
	if err := AddControllerIndex(informer); err != nil {
		t.Fatalf("AddControllerIndex must be idempotent: %v", err)
	}
	idx := informer.GetIndexer()
	other := pod("o", "web", "", func(p *v1.Pod) { p.Namespace = "other" })
	for _, p := range []*v1.Pod{pod("a", "web", "owner-uid"), pod("b", "web", ""), pod("c", "web", "x"), other} {
		if err := idx.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	owned, err := ByController[*v1.Pod](idx, "owner-uid")
	if err != nil || len(owned) != 1 || owned[0].Name != "a" {
		t.Errorf("ByController = %v, %v", owned, err)
	}
	orphans, err := Orphans[*v1.Pod](idx, "ns")
	if err != nil || len(orphans) != 1 || orphans[0].Name != "b" {
		t.Errorf("Orphans = %v, %v", orphans, err)
	}
	if wrongType, _ := ByController[*metav1.ObjectMeta](idx, "owner-uid"); len(wrongType) != 0 {
		t.Error("objects of another type must be skipped")
	}
}
