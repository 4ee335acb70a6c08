package analysis

import (
	"errors"
	"fmt"
	"strings"
	"text/template"
	"text/template/parse"
)

// MaxQueryLength is the longest rendered query, in bytes; a template that renders more is an error.
const MaxQueryLength = 16 << 10

// QueryArgs are what a Prometheus query template reads (EX-6): `{{ .Namespace }}`, `{{ .Deployment }}`,
// `{{ .NewPodTemplateHash }}`, `{{ .StablePodTemplateHash }}` (the pod-template-hash of the ReplicaSet the
// rollout started from; empty for a Deployment's first rollout), `{{ .Revision }}` (the new revision, OM-1)
// and `{{ .Args.NAME }}` (the step's args, ArgMap).
type QueryArgs struct {
	Namespace, Deployment                     string
	NewPodTemplateHash, StablePodTemplateHash string
	Revision                                  int64
	Args                                      map[string]string
}

// RenderQuery renders the query template query with args. Errors: the template does not parse, it uses a
// field QueryArgs lacks or an arg args lacks (missingkey=error: a typo never becomes an empty label value
// that matches nothing or everything), or it renders more than MaxQueryLength bytes.
func RenderQuery(query string, args QueryArgs) (string, error) {
	t, err := parseQuery(query)
	if err != nil {
		return "", err
	}
	var out limitedBuilder
	if err := t.Execute(&out, args); err != nil {
		return "", fmt.Errorf("query template: %s", oneLine(err.Error()))
	}
	return out.String(), nil
}

// parseQuery parses query as RenderQuery's template and checks it against QueryArgs by rendering it with
// placeholder values for every field and every `.Args.NAME` it names.
func parseQuery(query string) (*template.Template, error) {
	t, err := template.New("query").Option("missingkey=error").Parse(query)
	if err != nil {
		return nil, fmt.Errorf("query template does not parse: %s", oneLine(err.Error()))
	}
	sample := QueryArgs{Namespace: "ns", Deployment: "d", NewPodTemplateHash: "h", StablePodTemplateHash: "s", Revision: 1, Args: map[string]string{}}
	for _, name := range queryArgNames(t) {
		sample.Args[name] = "a"
	}
	var out limitedBuilder
	if err := t.Execute(&out, sample); err != nil && !errors.Is(err, errQueryTooLong) {
		return nil, fmt.Errorf("query template: %s (it may use .Namespace, .Deployment, .NewPodTemplateHash, .StablePodTemplateHash, .Revision, .Args.NAME)", oneLine(err.Error()))
	}
	return t, nil
}

// queryArgNames returns the NAMEs of the `.Args.NAME` fields t uses, in order of first use.
func queryArgNames(t *template.Template) []string {
	var names []string
	seen := map[string]bool{}
	var walk func(n parse.Node)
	walk = func(n parse.Node) {
		switch n := n.(type) {
		case *parse.ListNode:
			if n != nil {
				for _, c := range n.Nodes {
					walk(c)
				}
			}
		case *parse.ActionNode:
			walk(n.Pipe)
		case *parse.IfNode:
			walkBranch(&n.BranchNode, walk)
		case *parse.RangeNode:
			walkBranch(&n.BranchNode, walk)
		case *parse.WithNode:
			walkBranch(&n.BranchNode, walk)
		case *parse.TemplateNode:
			walk(n.Pipe)
		case *parse.PipeNode:
			if n != nil {
				for _, c := range n.Cmds {
					for _, a := range c.Args {
						walk(a)
					}
				}
			}
		case *parse.FieldNode:
			if len(n.Ident) >= 2 && n.Ident[0] == "Args" && !seen[n.Ident[1]] {
				seen[n.Ident[1]] = true
				names = append(names, n.Ident[1])
			}
		}
	}
	if t.Tree != nil {
		walk(t.Tree.Root)
	}
	return names
}

func walkBranch(b *parse.BranchNode, walk func(parse.Node)) {
	walk(b.Pipe)
	walk(b.List)
	if b.ElseList != nil {
		walk(b.ElseList)
	}
}

var errQueryTooLong = fmt.Errorf("the query renders to more than %d bytes", MaxQueryLength)

// limitedBuilder is a strings.Builder that refuses to grow past MaxQueryLength.
type limitedBuilder struct{ strings.Builder }

func (b *limitedBuilder) Write(p []byte) (int, error) {
	if b.Len()+len(p) > MaxQueryLength {
		return 0, errQueryTooLong
	}
	return b.Builder.Write(p)
}
