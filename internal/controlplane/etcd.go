package controlplane

import (
	"fmt"
	"io"
	"net/url"
	"strconv"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// etcdStartTimeout bounds how long Start waits for embedded etcd to serve.
const etcdStartTimeout = 60 * time.Second

// etcdConfig builds the embedded etcd configuration: data in dataDir, client and peer listeners on 127.0.0.1 at
// the given ports, plain HTTP (loopback only), zap logging into logOut at error level: etcd's warnings on a
// developer machine are request-duration statistics ("apply request took too long") that grew etcd.log by
// megabytes an hour and said nothing actionable. It is pure.
func etcdConfig(dataDir string, logOut io.Writer, clientPort, peerPort int) *embed.Config {
	cfg := embed.NewConfig()
	cfg.Name = "kubedeploy"
	cfg.Dir = dataDir
	clientURL := url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(clientPort)}
	peerURL := url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(peerPort)}
	cfg.ListenClientUrls = []url.URL{clientURL}
	cfg.AdvertiseClientUrls = []url.URL{clientURL}
	cfg.ListenPeerUrls = []url.URL{peerURL}
	cfg.AdvertisePeerUrls = []url.URL{peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.Logger = "zap"
	cfg.LogLevel = "error"
	core := zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(logOut), zapcore.ErrorLevel)
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.New(core))
	return cfg
}

// startEtcd starts embedded etcd and waits until it serves clients. On failure nothing is left running.
func startEtcd(cfg *embed.Config) (*embed.Etcd, error) {
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("start etcd: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
		return e, nil
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("start etcd: %w", err)
	case <-time.After(etcdStartTimeout):
		e.Server.Stop()
		e.Close()
		return nil, fmt.Errorf("start etcd: not ready after %s", etcdStartTimeout)
	}
}

// etcdClientURL is the URL kube-apiserver uses to reach embedded etcd.
func etcdClientURL(cfg *embed.Config) string {
	return cfg.ListenClientUrls[0].String()
}
