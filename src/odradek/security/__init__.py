"""Who a request comes from and what it may do: the principal (principal.py), the authorizer hook
(authorizer.py) the handlers ask (server/authz.py), and Kafka's ACL authorizer behind it: ACL values
and matching (acls.py), the decisions (acl_authorizer.py) and the ACLs' storage (acl_store.py)."""
