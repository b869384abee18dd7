"""Security: listeners' TLS and SASL, principals, SCRAM credentials, and the ACLs the authorizer reads."""
