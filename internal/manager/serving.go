package manager

import "github.com/kubedeploy/kubedeploy/internal/serving"

// DefaultSecurePort is the default port of `kubedeploy controllers` for /healthz, /readyz, /livez and /metrics
// (serving.DefaultSecurePort, 10260).
const DefaultSecurePort = serving.DefaultSecurePort

// Serving configures the endpoint serving /healthz, /livez, /readyz and /metrics: HTTPS with delegated
// authentication and authorization, or plain HTTP in observe mode; see serving.Config.
type Serving = serving.Config
