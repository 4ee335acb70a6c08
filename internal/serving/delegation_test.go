package serving

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/request/anonymous"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	"k8s.io/apiserver/pkg/authentication/request/union"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

// reviewingClient is a fake clientset whose TokenReviews authenticate token "good" as user "alice" (group
// "readers"), and whose SubjectAccessReviews allow group "readers" to get /metrics and deny user "mallory"
// everything; it counts the reviews it answers.
func reviewingClient(t *testing.T) (*fake.Clientset, *int, *int) {
	t.Helper()
	client := fake.NewClientset()
	tokenReviews, accessReviews := new(int), new(int)
	client.PrependReactor("create", "tokenreviews", func(a clienttesting.Action) (bool, runtime.Object, error) {
		*tokenReviews++
		review := a.(clienttesting.CreateAction).GetObject().(*authenticationv1.TokenReview).DeepCopy()
		if review.Spec.Token == "good" {
			review.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{
				Username: "alice", UID: "u1", Groups: []string{"readers", user.AllAuthenticated},
			}}
		}
		return true, review, nil
	})
	client.PrependReactor("create", "subjectaccessreviews", func(a clienttesting.Action) (bool, runtime.Object, error) {
		*accessReviews++
		review := a.(clienttesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
		spec := review.Spec
		switch {
		case spec.User == "mallory":
			review.Status = authorizationv1.SubjectAccessReviewStatus{Denied: true, Reason: "mallory is banned"}
		case strings.Contains(strings.Join(spec.Groups, ","), "readers") && spec.NonResourceAttributes.Path == "/metrics" && spec.NonResourceAttributes.Verb == "get":
			review.Status = authorizationv1.SubjectAccessReviewStatus{Allowed: true}
		}
		return true, review, nil
	})
	return client, tokenReviews, accessReviews
}

// TestDelegatedAuth: the serving endpoint's authentication and authorization answer as kube-controller-manager's
// delegated ones: health paths open to anyone, /metrics to a user the SubjectAccessReview allows, 401 for a token the
// TokenReview rejects, 403 with the reason for a user it does not allow, system:masters without asking; and each
// review answer is reused for reviewCacheTTL instead of asking again per scrape.
func TestDelegatedAuth(t *testing.T) {
	client, tokenReviews, accessReviews := reviewingClient(t)
	tokens := bearertoken.New(tokenReviewer{client: client})
	masters := authenticator.RequestFunc(func(req *http.Request) (*authenticator.Response, bool, error) {
		if req.Header.Get("X-Test-User") == "" {
			return nil, false, nil
		}
		return &authenticator.Response{User: &user.DefaultInfo{Name: req.Header.Get("X-Test-User"), Groups: req.Header.Values("X-Test-Group")}}, true, nil
	})
	authn := union.NewFailOnError(union.New(masters, tokens), anonymous.NewAuthenticator(nil))
	h := withDelegatedAuth(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Header.Get("Authorization") != "" {
			t.Errorf("%s: the Authorization header reached the handler", req.URL.Path)
		}
		_, _ = w.Write([]byte("served"))
	}), authn, delegatedAuthorization(client))

	for _, tc := range []struct {
		name, path, token, user, group string
		wantCode                       int
		wantBody                       string
	}{
		{name: "anonymous health", path: "/readyz", wantCode: http.StatusOK, wantBody: "served"},
		{name: "anonymous metrics", path: "/metrics", wantCode: http.StatusForbidden, wantBody: `cannot get path \"/metrics\"`},
		{name: "rejected token", path: "/metrics", token: "bad", wantCode: http.StatusUnauthorized, wantBody: `"reason":"Unauthorized"`},
		{name: "reader token", path: "/metrics", token: "good", wantCode: http.StatusOK, wantBody: "served"},
		{name: "reader token, again", path: "/metrics", token: "good", wantCode: http.StatusOK, wantBody: "served"},
		{name: "reader, other path", path: "/debug/pprof/heap", token: "good", wantCode: http.StatusForbidden, wantBody: `User \"alice\" cannot get path \"/debug/pprof/heap\"`},
		{name: "denied user", path: "/metrics", user: "mallory", wantCode: http.StatusForbidden, wantBody: "mallory is banned"},
		{name: "system:masters", path: "/debug/pprof/heap", user: "admin", group: user.SystemPrivilegedGroup, wantCode: http.StatusOK, wantBody: "served"},
	} {
		req := httptest.NewRequest(http.MethodGet, "https://127.0.0.1"+tc.path, nil)
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		if tc.user != "" {
			req.Header.Set("X-Test-User", tc.user)
		}
		if tc.group != "" {
			req.Header.Set("X-Test-Group", tc.group)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tc.wantCode || !strings.Contains(rec.Body.String(), tc.wantBody) {
			t.Errorf("%s: GET %s = %d %q, want %d containing %q", tc.name, tc.path, rec.Code, rec.Body.String(), tc.wantCode, tc.wantBody)
		}
	}
	// Reviews: tokens "bad" and "good" ×3 (the reviewer here is not behind Secure's token cache) and SARs for anonymous, alice /metrics (once: the
	// second scrape is cached), alice pprof, mallory; none for the health path or system:masters.
	if *tokenReviews != 4 {
		t.Errorf("%d TokenReviews, want 4", *tokenReviews)
	}
	if *accessReviews != 4 {
		t.Errorf("%d SubjectAccessReviews, want 4 (the repeated /metrics scrape answered from the cache)", *accessReviews)
	}
}

// TestReviewRetries: a review the API server could not answer (5xx, 429, no connection) is asked again; one it
// refused with a 4xx is not, and its error reaches the caller.
func TestReviewRetries(t *testing.T) {
	defer func(b wait.Backoff) { reviewBackoff = b }(reviewBackoff)
	reviewBackoff = wait.Backoff{Steps: 3}
	gr := schema.GroupResource{Group: "authentication.k8s.io", Resource: "tokenreviews"}
	for _, tc := range []struct {
		name      string
		err       error
		wantCalls int
	}{
		{"unavailable", apierrors.NewServiceUnavailable("restarting"), 3},
		{"throttled", apierrors.NewTooManyRequests("slow down", 1), 3},
		{"no connection", errors.New("dial tcp 127.0.0.1:6443: connect: connection refused"), 3},
		{"forbidden", apierrors.NewForbidden(gr, "", errors.New("no RBAC for tokenreviews")), 1},
	} {
		client := fake.NewClientset()
		calls := 0
		client.PrependReactor("create", "tokenreviews", func(clienttesting.Action) (bool, runtime.Object, error) {
			calls++
			return true, nil, tc.err
		})
		_, ok, err := tokenReviewer{client: client}.AuthenticateToken(context.Background(), "t")
		if ok || err == nil || calls != tc.wantCalls {
			t.Errorf("%s: ok=%v err=%v after %d calls, want an error after %d", tc.name, ok, err, calls, tc.wantCalls)
		}
	}
}
