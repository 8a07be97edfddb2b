// Copied unchanged from github.com/asynkron/protoactor-go
// (cluster/clusterproviders/etcd, v0.0.0-20240822202345-3c0e61ca19c9),
// Copyright the protoactor-go authors, Apache License 2.0.

package provider

import (
	"fmt"
	"strings"
)

func getNodeID(key string, sep string) (string, error) {
	tmpArr := strings.Split(key, sep)
	if len(tmpArr) == 0 {
		return "", fmt.Errorf("invalid key or sep")
	}
	lastIndex := len(tmpArr) - 1
	return tmpArr[lastIndex], nil
}
