package config

import (
	"os"
	"testing"
)

func readSource(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("config.go")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
