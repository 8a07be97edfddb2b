// Package bearer verifies the bearer tokens of requests to an MCP server
// over HTTP and names the principal each one belongs to: tokens listed in
// a file ([TokenFile], principal as the file names it), and OAuth 2.1
// access tokens that are JWTs of one issuer ([OAuthVerifier], principal
// "oauth:SUBJECT"), with the protected resource metadata (RFC 9728) that
// tells clients where to get one. Each Verify method is an
// auth.TokenVerifier of the MCP Go SDK, for mcpserver's
// HTTPOptions.Verifier; combine several in a function of your own.
//
// Every principal follows one rule: 1 to 256 bytes of UTF-8 without
// spaces or control characters. A token file refuses a name that breaks
// it, an OAuthVerifier a token whose subject would, and mcpserver answers
// a request whose verifier returned such a principal with 500.
package bearer
