// Package controllertest is the test support the controller packages'
// unit tests share: a fixture base over a fake clientset whose informer
// indexers a test fills by hand (Fixture), and the fuzz decoders and
// API-validation oracles both controllers' bad-input fuzz targets use
// (FuzzSelector, SpecValid).
//
// It is imported only by _test.go files under internal/controller. It must
// not import the controller packages (their tests import it) and must not
// hold controller logic: each controller package's fixture embeds Fixture
// and adds its own controller.
package controllertest
