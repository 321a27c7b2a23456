"""ZooKeeper mode: Kafka's znode layout and the ZooKeeper-backed controller and broker registration."""
