package analysis

import (
	"strings"
	"testing"
)

// EX-6: a query template reads the rollout's fields and args; a missing arg or field is an error
// (missingkey=error), never an empty label value.
func TestRenderQuery(t *testing.T) {
	args := QueryArgs{Namespace: "shop", Deployment: "web", NewPodTemplateHash: "abc12", StablePodTemplateHash: "old34",
		Revision: 7, Args: map[string]string{"service": "checkout"}}
	cases := []struct {
		name, query, want, wantErr string
	}{
		{"every field", `x{ns="{{.Namespace}}",d="{{.Deployment}}",new="{{.NewPodTemplateHash}}",old="{{.StablePodTemplateHash}}",rev="{{.Revision}}",svc="{{.Args.service}}"}`,
			`x{ns="shop",d="web",new="abc12",old="old34",rev="7",svc="checkout"}`, ""},
		{"no template actions", "sum(up)", "sum(up)", ""},
		{"missing arg", `x{a="{{ .Args.missing }}"}`, "", `map has no entry for key "missing"`},
		{"unknown field", `x{a="{{ .Hash }}"}`, "", "can't evaluate field Hash"},
		{"does not parse", `x{a="{{ .Namespace }"}`, "", "does not parse"},
		{"too long", `{{ printf "%020000d" 1 }}`, "", "renders to more than 16384 bytes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := RenderQuery(tc.query, args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("RenderQuery = %q, %v; want an error containing %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("RenderQuery = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// queryArgNames finds `.Args.NAME` wherever a template uses it, each name once, so Resolve can name the args a
// step must give.
func TestQueryArgNames(t *testing.T) {
	cases := []struct {
		name, query string
		want        []string
	}{
		{"none", "up", nil},
		{"action", "{{ .Args.a }}{{ .Args.b }}{{ .Args.a }}", []string{"a", "b"}},
		{"branches and pipes", "{{ if .Args.x }}{{ .Args.y | printf \"%s\" }}{{ else }}{{ range .Args.z }}{{ end }}{{ end }}{{ with .Args.w }}{{ end }}", []string{"x", "y", "z", "w"}},
		{"function argument", `{{ printf "%s-%s" .Namespace .Args.svc }}`, []string{"svc"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tmpl, err := parseQuery(tc.query)
			if err != nil {
				t.Fatal(err)
			}
			got := queryArgNames(tmpl)
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("queryArgNames = %q, want %q", got, tc.want)
			}
		})
	}
}
