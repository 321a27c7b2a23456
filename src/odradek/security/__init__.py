"""Who a request comes from and what it may do (docs/security.md).

- principals: `KafkaPrincipal` and the TLS principal mapping (principal.py);
- TLS: a listener's and a client's SSLContexts from Kafka's ssl.* keys (ssl_config.py);
- SASL: the server mechanisms, the per-connection gate and the brokers' own client (sasl/);
- ACLs: the authorizer hook the handlers ask (authorizer.py, through server/authz.py) and Kafka's
  ACL authorizer behind it: ACL values and matching (acls.py), the decisions (acl_authorizer.py) and
  the ACLs' storage (acl_store.py);
- odradek's own blocking client's security from a Kafka client's settings (client_config.py).
"""
