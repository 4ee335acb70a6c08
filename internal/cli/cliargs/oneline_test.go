package cliargs

import (
	"errors"
	"testing"
)

func TestOneLine(t *testing.T) {
	err := errors.Join(errors.New("context canceled"), errors.New("etcd did not stop\n"), errors.New("kube-apiserver: timeout"))
	if got, want := OneLine(err), "context canceled; etcd did not stop; kube-apiserver: timeout"; got != want {
		t.Errorf("OneLine = %q, want %q", got, want)
	}
	if got := OneLine(errors.New("one line")); got != "one line" {
		t.Errorf("OneLine = %q", got)
	}
}
