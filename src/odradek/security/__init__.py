"""Who a request comes from and what it may do: the principal (principal.py) and the authorizer hook
(authorizer.py) of the request path (server/dispatcher.py)."""
