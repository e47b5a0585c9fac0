"""Security of a node's listeners: TLS, SASL, principals and the ACL authorizer."""
