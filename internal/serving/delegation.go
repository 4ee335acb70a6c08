package serving

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/request/anonymous"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	"k8s.io/apiserver/pkg/authentication/request/union"
	x509request "k8s.io/apiserver/pkg/authentication/request/x509"
	tokencache "k8s.io/apiserver/pkg/authentication/token/cache"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/path"
	authzunion "k8s.io/apiserver/pkg/authorization/union"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
)

// Delegated authentication and authorization of the serving endpoint, with kube-controller-manager's defaults
// (its --authentication-* and --authorization-* flags left unset).
const (
	// reviewCacheTTL is how long a TokenReview or SubjectAccessReview answer is reused, allowed or not (10 s).
	reviewCacheTTL = 10 * time.Second
	// reviewTimeout bounds one TokenReview or SubjectAccessReview request (10 s).
	reviewTimeout = 10 * time.Second
	// sarCacheSize is how many SubjectAccessReview answers are kept.
	sarCacheSize = 1024
	// privilegedGroup is always allowed, without asking the API server.
	privilegedGroup = user.SystemPrivilegedGroup // "system:masters"
)

// reviewBackoff retries a review the API server could not answer (5xx, 429, connection errors): 5 tries,
// 0.5 s × 1.5ⁿ apart, as k8s.io/apiserver's DefaultAuthWebhookRetryBackoff.
var reviewBackoff = wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}

// delegatedAuthentication authenticates a request as kube-controller-manager's delegated authentication does: a
// client certificate verified against the cluster's client CA (ca, from the extension-apiserver-authentication
// ConfigMap; reloaded when it changes) with the user from its CN and groups from its O; else a bearer token
// checked with a TokenReview (answers cached reviewCacheTTL); else, with neither, the anonymous user
// system:anonymous, whom authorization then refuses except on the health paths. A certificate that does not
// verify or a token the API server rejects is an error (401), not anonymous.
func delegatedAuthentication(client kubernetes.Interface, ca *dynamiccertificates.ConfigMapCAController) authenticator.Request {
	certs := x509request.NewDynamic(ca.VerifyOptions, x509request.CommonNameUserConversion)
	tokens := bearertoken.New(tokencache.New(tokenReviewer{client: client}, false, reviewCacheTTL, reviewCacheTTL))
	return union.NewFailOnError(union.New(certs, tokens), anonymous.NewAuthenticator(nil))
}

// tokenReviewer checks a bearer token with the API server's TokenReview API.
type tokenReviewer struct {
	client kubernetes.Interface
}

// AuthenticateToken returns the token's user if the API server authenticates it, ok false if it does not, and an
// error if it could not be asked (after reviewBackoff).
func (r tokenReviewer) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	review := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}
	var result *authenticationv1.TokenReview
	err := retry.OnError(reviewBackoff, retriableReviewError, func() error {
		ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
		defer cancel()
		var err error
		result, err = r.client.AuthenticationV1().TokenReviews().Create(ctx, review, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return nil, false, fmt.Errorf("TokenReview: %w", err)
	}
	if !result.Status.Authenticated {
		return nil, false, nil
	}
	u := result.Status.User
	info := &user.DefaultInfo{Name: u.Username, UID: u.UID, Groups: u.Groups}
	if len(u.Extra) > 0 {
		info.Extra = make(map[string][]string, len(u.Extra))
		for k, v := range u.Extra {
			info.Extra[k] = v
		}
	}
	return &authenticator.Response{User: info, Audiences: result.Status.Audiences}, true, nil
}

// delegatedAuthorization authorizes as kube-controller-manager's delegated authorization does: system:masters
// and the health paths (unauthenticatedPaths) always, anything else by a SubjectAccessReview (for /metrics:
// nonResourceURLs ["/metrics"], verb get), answers cached reviewCacheTTL.
func delegatedAuthorization(client kubernetes.Interface) authorizer.Authorizer {
	paths, err := path.NewAuthorizer(unauthenticatedPaths)
	if err != nil {
		panic(err) // unauthenticatedPaths is a constant list of valid paths
	}
	privileged := authorizer.AuthorizerFunc(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
		if u := a.GetUser(); u != nil && slices.Contains(u.GetGroups(), privilegedGroup) {
			return authorizer.DecisionAllow, "", nil
		}
		return authorizer.DecisionNoOpinion, "", nil
	})
	return authzunion.New(privileged, paths, &accessReviewer{client: client, cache: cache.NewLRUExpireCache(sarCacheSize)})
}

// accessReviewer asks the API server's SubjectAccessReview API whether a user may make a non-resource request.
type accessReviewer struct {
	client kubernetes.Interface
	cache  *cache.LRUExpireCache // review key → reviewAnswer
}

type reviewAnswer struct {
	decision authorizer.Decision
	reason   string
}

// Authorize returns DecisionAllow if the API server allows a's user the verb on a's path, DecisionDeny if it denies
// it, DecisionNoOpinion if neither (then the request is refused), and an error if it could not be asked (after
// reviewBackoff).
func (r *accessReviewer) Authorize(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	u := a.GetUser()
	if u == nil {
		return authorizer.DecisionNoOpinion, "no user", nil
	}
	spec := authorizationv1.SubjectAccessReviewSpec{
		User:                  u.GetName(),
		UID:                   u.GetUID(),
		Groups:                u.GetGroups(),
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: a.GetPath(), Verb: a.GetVerb()},
	}
	if extra := u.GetExtra(); len(extra) > 0 {
		spec.Extra = make(map[string]authorizationv1.ExtraValue, len(extra))
		for k, v := range extra {
			spec.Extra[k] = v
		}
	}
	key, err := json.Marshal(spec)
	if err != nil {
		return authorizer.DecisionNoOpinion, "", err
	}
	if cached, ok := r.cache.Get(string(key)); ok {
		answer := cached.(reviewAnswer)
		return answer.decision, answer.reason, nil
	}
	var result *authorizationv1.SubjectAccessReview
	err = retry.OnError(reviewBackoff, retriableReviewError, func() error {
		ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
		defer cancel()
		var err error
		result, err = r.client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return authorizer.DecisionNoOpinion, "", fmt.Errorf("SubjectAccessReview: %w", err)
	}
	answer := reviewAnswer{decision: authorizer.DecisionNoOpinion, reason: result.Status.Reason}
	switch {
	case result.Status.Allowed:
		answer.decision = authorizer.DecisionAllow
	case result.Status.Denied:
		answer.decision = authorizer.DecisionDeny
	}
	r.cache.Add(string(key), answer, reviewCacheTTL)
	return answer.decision, answer.reason, nil
}

// retriableReviewError reports whether a review is worth asking again: the API server was unreachable or
// answered 5xx or 429; a 4xx answer (e.g. 403: our own credentials may not create reviews) will not change.
func retriableReviewError(err error) bool {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		code := status.Status().Code
		return code >= 500 || code == http.StatusTooManyRequests
	}
	return true
}

// withDelegatedAuth serves h to requests that authn authenticates and authz allows, as the
// WithAuthentication/WithAuthorization filters of kube-controller-manager's handler chain: 401 with a Status body
// when the credentials are bad, 403 when the user may not make the request (the non-resource verb is the HTTP
// method in lower case: GET is "get"), 500 if the decision could not be made.
func withDelegatedAuth(h http.Handler, authn authenticator.Request, authz authorizer.Authorizer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Cache-Control", "no-cache, private")
		logger := klog.FromContext(req.Context())
		resp, ok, err := authn.AuthenticateRequest(req)
		if err != nil || !ok {
			if err != nil {
				logger.V(2).Info("Unable to authenticate the request", "path", req.URL.Path, "err", err)
			}
			writeStatus(w, apierrors.NewUnauthorized("Unauthorized"))
			return
		}
		req.Header.Del("Authorization") // as the API server's filter: the token goes no further
		attrs := authorizer.AttributesRecord{User: resp.User, Verb: strings.ToLower(req.Method), Path: req.URL.Path}
		decision, reason, err := authz.Authorize(req.Context(), attrs)
		switch {
		case decision == authorizer.DecisionAllow:
			h.ServeHTTP(w, req)
		case err != nil:
			logger.Error(err, "Authorization failed", "user", resp.User.GetName(), "path", req.URL.Path)
			writeStatus(w, apierrors.NewInternalError(fmt.Errorf("authorizing the request: %w", err)))
		default:
			msg := fmt.Sprintf("forbidden: User %q cannot %s path %q", resp.User.GetName(), attrs.Verb, attrs.Path)
			if reason != "" {
				msg += ": " + reason
			}
			writeStatus(w, &apierrors.StatusError{ErrStatus: metav1.Status{
				Status: metav1.StatusFailure, Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden, Message: msg,
			}})
		}
	})
}

// writeStatus writes err's Status as the API server would: JSON, with its code as the HTTP status.
func writeStatus(w http.ResponseWriter, err *apierrors.StatusError) {
	status := err.Status()
	status.Kind, status.APIVersion = "Status", "v1"
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(int(status.Code))
	_ = json.NewEncoder(w).Encode(status)
}
