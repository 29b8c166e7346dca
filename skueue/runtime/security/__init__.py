"""Security: TLS contexts, the peer key, client tokens and the secret files they come from."""
