"""SASL authentication (Kafka's SaslServerAuthenticator and SaslClientAuthenticator, KIP-43, KIP-152,
KIP-368).

Modules:
- jaas.py: Kafka's `sasl.jaas.config` syntax (one login module, its control flag, its options);
- mechanisms.py: the server side of PLAIN, SCRAM-SHA-256/512 and OAUTHBEARER (Kafka's unsecured JWT
  validation), and the client side the broker's own connections use (PLAIN, SCRAM, OAUTHBEARER with
  an unsecured token);
- scram.py: SCRAM credentials salted and hashed as Kafka stores them
  (`salt=...,stored_key=...,server_key=...,iterations=...`) and the SCRAM message arithmetic;
- client.py: a client's SASL exchange (the broker's own connections authenticating to another
  broker; odradek's tools through security/client_config.py).
What reads the broker config or sits on a connection is in the server layer, above this one:
server/sasl_listener.py (a SASL listener's settings: sasl.enabled.mechanisms, the JAAS config of each
mechanism, connections.max.reauth.ms, ..., and the broker's own credentials) and
server/sasl_authenticator.py (the per-connection gate: handshake, authenticate, re-authentication,
failure delay, the bound on an unfinished handshake).
"""
