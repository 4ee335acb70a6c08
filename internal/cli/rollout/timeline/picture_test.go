package timeline

import "testing"

func TestShorten(t *testing.T) {
	long := "web-frontend-with-a-very-long-name-for-a-deployment-7d9c6b8f5d"
	for _, tc := range []struct{ name, in, want string }{
		{name: "short", in: "nginx-deployment-7d9c6b8f5d", want: "nginx-deployment-7d9c6b8f5d"},
		{name: "long keeps the hash", in: long, want: "…" + long[len(long)-maxName+1:]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := shorten(tc.in)
			if got != tc.want || len([]rune(got)) > maxName {
				t.Errorf("shorten(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}
