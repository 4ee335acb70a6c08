package deployment

import (
	"encoding/binary"
	"hash/fnv"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/dump"

	"github.com/kubedeploy/kubedeploy/internal/controller/rawtemplate"
	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// hashAlphabet maps decimal digits of the hash sum to characters (OM-18).
const hashAlphabet = "bcdfghjklmnpqrstvwxz2456789"

// maxNameLength is the DNS-1123 subdomain limit for ReplicaSet names (OM-21).
const maxNameLength = 253

// computeHash returns the pod-template-hash of template with collisionCount
// (OM-14..OM-18): FNV-1a 32 over the spew "%#v" text of the template value
// (k8s.io/utils/dump.ForHash), followed, when collisionCount is non-nil, by
// the little-endian uint32 count and four zero bytes; the decimal Sum32 is
// then mapped digit by digit through hashAlphabet.
func computeHash(template *v1.PodTemplateSpec, collisionCount *int32) string {
	return hashTemplate(template, "", collisionCount)
}

// hashTemplate is computeHash with unknown, the rawtemplate fingerprint of
// the template's fields kubedeploy's API does not know, written after the
// template (IM-8): templates that differ only there get different hashes,
// and for every template without such fields (unknown "") the hash is
// upstream's.
func hashTemplate(template *v1.PodTemplateSpec, unknown string, collisionCount *int32) string {
	h := fnv.New32a()
	// hash.Hash.Write never returns an error.
	_, _ = h.Write([]byte(dump.ForHash(*template)))
	_, _ = h.Write([]byte(unknown))
	if collisionCount != nil {
		var buf [8]byte
		binary.LittleEndian.PutUint32(buf[:4], uint32(*collisionCount))
		_, _ = h.Write(buf[:])
	}
	return renderHash(h.Sum32())
}

// renderHash maps the decimal digits of sum through hashAlphabet (OM-18).
func renderHash(sum uint32) string {
	digits := []byte(strconv.FormatUint(uint64(sum), 10))
	for i, c := range digits {
		digits[i] = hashAlphabet[int(c)%len(hashAlphabet)]
	}
	return string(digits)
}

// replicaSetName returns "<deploymentName>-<hash>", cutting the Deployment
// name so that the result fits 253 characters; the hash is never cut (OM-21).
func replicaSetName(deploymentName, hash string) string {
	limit := maxNameLength - 1 - len(hash)
	if limit > 0 && len(deploymentName) > limit {
		deploymentName = deploymentName[:limit]
	}
	return deploymentName + "-" + hash
}

// sameTemplate reports whether rs's pod template is d's (RV-1): equal as
// typed templates ignoring pod-template-hash, and with equal values of the
// fields kubedeploy's API does not know, as templates records them (IM-8; a
// nil templates knows of none).
func sameTemplate(templates *rawtemplate.Store, rs *appsv1.ReplicaSet, d *appsv1.Deployment) bool {
	return rolloutstate.TemplatesEqualIgnoringHash(&rs.Spec.Template, &d.Spec.Template) &&
		templates.Fingerprint(rs) == templates.Fingerprint(d)
}
