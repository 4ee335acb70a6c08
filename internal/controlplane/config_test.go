package controlplane

import (
	"strings"
	"testing"
	"time"
)

func TestConfigDefault(t *testing.T) {
	c := Config{DataDir: "/x"}
	c.Default()
	if c.Nodes != 3 || c.PodStartupDelay != time.Second || c.PodTerminationDelay != time.Second || c.APIPort != 0 ||
		c.ControllerManagerQPS != 5000 || c.ControllerManagerBurst != 10000 {
		t.Fatalf("Default() = %+v", c)
	}
	c = Config{DataDir: "/x", Nodes: 7, PodStartupDelay: 5 * time.Second, PodTerminationDelay: 2 * time.Second,
		ControllerManagerQPS: 20, ControllerManagerBurst: 30}
	c.Default()
	if c.Nodes != 7 || c.PodStartupDelay != 5*time.Second || c.PodTerminationDelay != 2*time.Second ||
		c.ControllerManagerQPS != 20 || c.ControllerManagerBurst != 30 {
		t.Fatalf("Default() overrode set values: %+v", c)
	}
}

func TestConfigValidate(t *testing.T) {
	valid := Config{DataDir: "/x", APIPort: 6443, Nodes: 3, PodStartupDelay: time.Second, PodTerminationDelay: time.Second}
	tests := []struct {
		name    string
		mutate  func(*Config)
		wantErr string
	}{
		{name: "valid", mutate: func(*Config) {}},
		{name: "any free port", mutate: func(c *Config) { c.APIPort = 0 }},
		{name: "empty data dir", mutate: func(c *Config) { c.DataDir = "" }, wantErr: "data dir must not be empty"},
		{name: "negative port", mutate: func(c *Config) { c.APIPort = -1 }, wantErr: "api port -1 is out of range"},
		{name: "port too big", mutate: func(c *Config) { c.APIPort = 70000 }, wantErr: "api port 70000 is out of range"},
		{name: "no nodes", mutate: func(c *Config) { c.Nodes = 0 }, wantErr: "nodes must be at least 1"},
		{name: "negative startup delay", mutate: func(c *Config) { c.PodStartupDelay = -time.Second }, wantErr: "pod startup delay must not be negative"},
		{name: "negative termination delay", mutate: func(c *Config) { c.PodTerminationDelay = -1 }, wantErr: "pod termination delay must not be negative"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := valid
			tc.mutate(&c)
			err := c.Validate()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Validate() = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestNewRejectsInvalidConfig(t *testing.T) {
	if _, err := New(Config{}); err == nil || !strings.Contains(err.Error(), "data dir") {
		t.Fatalf("New(Config{}) = %v, want data dir error", err)
	}
}
