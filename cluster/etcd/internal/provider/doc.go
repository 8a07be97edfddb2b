// Package provider is protoactor-go's etcd cluster provider with its data
// races fixed (see etcd_provider.go): package etcd's membership uses it
// until the fix is upstream.
package provider
