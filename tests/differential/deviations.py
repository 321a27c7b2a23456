# ruff: noqa: E501  (the recorded difference lines are kept whole, one per line)
"""The differences between Kafka 3.9's answers and odradek's that are kept on purpose, each with its
reason: a case of the tables names one (`Case.deviation`) with the exact lines it produces, and
docs/differential.md lists every one (a test checks it does)."""

from __future__ import annotations

DEVIATIONS: dict[str, str] = {
    "unlisted-topic-configs": (
        "odradek does not list message.format.version (deprecated in 3.x, removed in Kafka 4.0: odradek "
        "accepts and ignores it) nor remote.log.copy.disable / remote.log.delete.on.disable (odradek has no "
        "tiered storage); every other case leaves these three out of the config lists it compares."
    ),
    "auto-create-synchronous": (
        "A Metadata request that auto-creates a topic: Kafka's ZooKeeper-mode broker answers "
        "LEADER_NOT_AVAILABLE with no partitions (the controller elects the leaders later, asynchronously); "
        "odradek's single node creates the topic and its leaders before answering, so the first answer "
        "already lists the partitions. Both answer alike from the next request on."
    ),
    "produce-error-answer": (
        "A refused Produce partition: odradek names the cause in error_message (v8+) where Kafka 3.9 leaves "
        "it null, answers log_start_offset -1 where Kafka gives the log's start offset (sequence and "
        "record errors), and fails the whole partition without a record_errors entry per batch_index "
        "(documented in server/handlers/produce.py: the error code, the contract clients act on, is the same)."
    ),
    "truncated-batch-corrupt": (
        "A produce whose only batch is cut short: Kafka's reader skips the incomplete batch, finds none and "
        "answers INVALID_RECORD (87); odradek checks the framing and answers CORRUPT_MESSAGE (2), which "
        "names the fault (both refuse the write; a client retries neither)."
    ),
    "fetch-error-offsets": (
        "Fetch at an offset out of range: Kafka answers OFFSET_OUT_OF_RANGE with high_watermark, "
        "last_stable_offset and log_start_offset all -1; odradek fills in the partition's real offsets "
        "(server/handlers/fetch.py), which a client may use and none depends on being -1."
    ),
    "failed-request-creates-no-group": (
        "A JoinGroup refused for its protocols, or an OffsetCommit refused for its metadata size, leaves an "
        "Empty group behind in Kafka (its coordinator creates the group before checking the request); "
        "odradek creates a group only for a request it accepts, so DescribeGroups then answers Dead. The "
        "Kafka group holds nothing and expires; no client can tell them apart otherwise."
    ),
    "describe-configs-v0-is-default": (
        "DescribeConfigs v0: Kafka 3.9 answers is_default false for every config (it derives the v0 flag from "
        "a source it never sets on that path); odradek answers true for a config at its default, the "
        "field's meaning."
    ),
    "describe-configs-synonyms": (
        "DescribeConfigs with include_synonyms: for a topic config at its default, odradek lists the broker "
        "default it comes from (retention.ms: log.retention.hours, DEFAULT_CONFIG); Kafka 3.9 lists no synonym."
    ),
    "error-message-presence": (
        "Free-text error messages only: with the same error code, one broker fills error_message and the other "
        "leaves it null or empty (Kafka names the request and session in a cluster authorization failure of "
        "the ACL APIs, odradek gives none; odradek names an unknown topic in DescribeConfigs, which its own "
        "configs tool prints, where Kafka gives ''). Clients act on the code."
    ),
    "no-broker-loggers": (
        "DescribeConfigs of a BROKER_LOGGER resource (Kafka's log4j levels): odradek has no broker logger "
        "resource and answers INVALID_REQUEST."
    ),
    "invalid-value-unknown-server-error": (
        "A request value Kafka's parser rejects with a generic exception (an unknown config operation, an "
        "ACL with an ANY operation, a MATCH pattern, an unknown resource type, a principal without a type): "
        "Kafka answers UNKNOWN_SERVER_ERROR (-1) without a message; odradek answers INVALID_REQUEST (42) "
        "with the reason."
    ),
    "denied-request-shape": (
        "A DescribeUserScramCredentials refused for cluster authorization: Kafka answers the top-level error "
        "and one result for a user named '' with the same error; odradek answers the top-level error with no "
        "result."
    ),
    "controller-apis-single-node": (
        "LeaderAndIsr, StopReplica and UpdateMetadata are served in ZooKeeper mode only "
        "(server/handlers/leader_and_isr.py): odradek's single node is its own controller and closes the "
        "connection, as Kafka does for an API its mode does not enable; the ZooKeeper-mode Kafka broker "
        "answers STALE_CONTROLLER_EPOCH."
    ),
    "api-versions-ranges": (
        "The advertised APIs: odradek serves Produce v3+, Fetch v4+ and ListOffsets v1+ (only RecordBatch v2 "
        "is stored), FindCoordinator up to v5 (v6 is KIP-932's share groups), no delegation tokens (38-41), "
        "no UpdateFeatures, Envelope or AllocateProducerIds (57, 58, 67), the controller-to-broker APIs "
        "(4-7, 56) only in ZooKeeper mode, DescribeTopicPartitions (75), which Kafka serves on KRaft brokers "
        "only, and KIP-848's ConsumerGroupHeartbeat and ConsumerGroupDescribe (68, 69) at v0-v1, which "
        "Kafka 3.9's ZooKeeper-mode broker advertises at v0 and answers UNSUPPORTED_VERSION; odradek also "
        "serves KIP-932's ShareGroupHeartbeat and ShareGroupDescribe (76, 77) at v1, ShareFetch and "
        "ShareAcknowledge (78, 79) at v1-v2, Describe/Alter/DeleteShareGroupOffsets (90-92) at v0-v1, "
        "v0 and v0, and the share coordinator's inter-broker APIs (83-87), which Kafka 3.9 does not "
        "advertise. Kafka 4's newer versions odradek serves are "
        "advertised past Kafka 3.9's: Fetch v18, ListOffsets v10-v11, Metadata v13, ApiVersions v5, "
        "DescribeLogDirs v5, DeleteGroups v3, DescribeCluster v2, ListTransactions v2, "
        "AlterPartitionReassignments v1 (their handlers say "
        "what each adds). Sent anyway, an API a broker does not serve closes the connection there."
    ),
    "consumer-group-protocol": (
        "ConsumerGroupHeartbeat (KIP-848): odradek serves consumer-protocol groups in both modes and "
        "validates the request as Kafka 4 does (a join without topic_partitions is INVALID_REQUEST, with "
        "its reason); Kafka 3.9's ZooKeeper-mode broker answers every one UNSUPPORTED_VERSION "
        "(coordinator/consumer_group.py)."
    ),
    "compression-as-produced": (
        "A topic's compression.type: Kafka recompresses each batch to the topic's codec (or stores it "
        "uncompressed for 'uncompressed'); odradek stores and serves batches as produced, whatever the "
        "topic says (docs/compatibility.md: compression). A gap: consumers read the same records either way, the bytes "
        "on disk and on the wire differ."
    ),
    "zstd-before-produce-v7": (
        "A zstd batch in Produce v3-v6: Kafka answers UNSUPPORTED_COMPRESSION_TYPE (KIP-110 ties zstd to "
        "v7+); odradek stores it. Left so: the suite's own wire client (tests/compat/wire.py, Produce v3) "
        "sends zstd batches to test the bounded decompression, and no client sends zstd below v7."
    ),
    "list-offsets-v0": (
        "ListOffsets v0 (the multi-offset answer built from segment times) is not served by odradek "
        "(server/handlers/list_offsets.py): UNSUPPORTED_VERSION per partition; clients use v1+ since Kafka 0.10.1."
    ),
}


FIXES: dict[str, str] = {
    "create-topics-error-configs": (
        "CreateTopics v5+: a refused topic's result carries an empty config list, as Kafka's, not null "
        "(server/handlers/create_topics.py)."
    ),
    "delete-topics-unknown-message": (
        "DeleteTopics: an unknown topic name (UNKNOWN_TOPIC_OR_PARTITION) and a refused one "
        "(TOPIC_AUTHORIZATION_FAILED) are answered without an error message, as Kafka "
        "(server/handlers/delete_topics.py)."
    ),
    "create-topics-denied-config-error": (
        "CreateTopics v5+: a topic refused for authorization also carries topic_config_error_code "
        "TOPIC_AUTHORIZATION_FAILED, as Kafka's (server/handlers/create_topics.py)."
    ),
    "alter-configs-denied-message": (
        "AlterConfigs and IncrementalAlterConfigs: a resource refused for authorization is answered without "
        "an error message, as Kafka (server/handlers/alter_configs.py, incremental_alter_configs.py)."
    ),
    "elect-leaders-not-needed-message": (
        "ElectLeaders: ELECTION_NOT_NEEDED carries Kafka's message \"Leader election not needed for topic "
        'partition." (server/handlers/elect_leaders.py).'
    ),
    "txn-offset-commit-verified": (
        "TxnOffsetCommit: the group's offsets partition is verified with the transaction coordinator first "
        "(KIP-890 part 1, as Kafka 3.9): INVALID_TXN_STATE without AddOffsetsToTxn, INVALID_PRODUCER_EPOCH "
        "for another epoch (server/handlers/txn_offset_commit.py)."
    ),
    "reassignments-denied-shape": (
        "AlterPartitionReassignments and ListPartitionReassignments refused whole (cluster authorization): "
        "the answer lists each asked partition (with the error, for Alter) and Kafka's message, as Kafka's "
        "(server/handlers/alter_partition_reassignments.py, list_partition_reassignments.py)."
    ),
    "client-quotas-messages": (
        "AlterClientQuotas refused for cluster authorization carries Kafka's message on each entry, and "
        "DescribeClientQuotas with a bad filter its reason (server/handlers/alter_client_quotas.py, "
        "describe_client_quotas.py)."
    ),
    "api-versions-invalid-empty": (
        "ApiVersions v3+ with an invalid client software name: INVALID_REQUEST with an empty API list, as "
        "Kafka 3.9 answers, not the list (server/handlers/api_versions.py)."
    ),
    "fetch-refused-aborted-list": (
        "Fetch: a partition refused before any read (unknown topic or partition, unknown topic id, not "
        "authorized) carries an empty aborted_transactions list, as Kafka's, not null (server/handlers/fetch.py)."
    ),
    "find-coordinator-none-message": (
        "FindCoordinator v1-v3: a found coordinator's answer carries the error message \"NONE\", as Kafka's "
        "(server/handlers/find_coordinator.py)."
    ),
    "describe-producers-unknown-message": (
        "DescribeProducers: an unknown topic's partitions and a refused topic's carry Kafka's error messages "
        "(server/handlers/describe_producers.py)."
    ),
}

# ApiVersions v0-v3 answer the same ranges: each version's case records the same lines
_API_VERSIONS_RANGES = (
    "api-versions-ranges",
    (
        "0:api_versions.api_keys[api_key=0].min_version: kafka=0 odradek=3",
        "0:api_versions.api_keys[api_key=10].max_version: kafka=6 odradek=5",
        "0:api_versions.api_keys[api_key=18].max_version: kafka=4 odradek=5",
        "0:api_versions.api_keys[api_key=1].max_version: kafka=17 odradek=18",
        "0:api_versions.api_keys[api_key=1].min_version: kafka=0 odradek=4",
        "0:api_versions.api_keys[api_key=2].max_version: kafka=9 odradek=11",
        "0:api_versions.api_keys[api_key=2].min_version: kafka=0 odradek=1",
        "0:api_versions.api_keys[api_key=35].max_version: kafka=4 odradek=5",
        "0:api_versions.api_keys[api_key=38]: kafka={'api_key': 38, 'min_version': 0, 'max_version': 3} odradek='<missing>'",
        "0:api_versions.api_keys[api_key=39]: kafka={'api_key': 39, 'min_version': 0, 'max_version': 2} odradek='<missing>'",
        "0:api_versions.api_keys[api_key=3].max_version: kafka=12 odradek=13",
        "0:api_versions.api_keys[api_key=40]: kafka={'api_key': 40, 'min_version': 0, 'max_version': 2} odradek='<missing>'",
        "0:api_versions.api_keys[api_key=41]: kafka={'api_key': 41, 'min_version': 0, 'max_version': 3} odradek='<missing>'",
        "0:api_versions.api_keys[api_key=42].max_version: kafka=2 odradek=3",
        "0:api_versions.api_keys[api_key=45].max_version: kafka=0 odradek=1",
        "0:api_versions.api_keys[api_key=4]: kafka={'api_key': 4, 'min_version': 0, 'max_version': 7} odradek='<missing>'",
        "0:api_versions.api_keys[api_key=56]: kafka={'api_key': 56, 'min_version': 0, 'max_version': 3} odradek='<missing>'",
        "0:api_versions.api_keys[api_key=57]: kafka={'api_key': 57, 'min_version': 0, 'max_version': 1} odradek='<missing>'",
        "0:api_versions.api_keys[api_key=58]: kafka={'api_key': 58, 'min_version': 0, 'max_version': 0} odradek='<missing>'",
        "0:api_versions.api_keys[api_key=5]: kafka={'api_key': 5, 'min_version': 0, 'max_version': 4} odradek='<missing>'",
        "0:api_versions.api_keys[api_key=60].max_version: kafka=1 odradek=2",
        "0:api_versions.api_keys[api_key=66].max_version: kafka=1 odradek=2",
        "0:api_versions.api_keys[api_key=67]: kafka={'api_key': 67, 'min_version': 0, 'max_version': 0} odradek='<missing>'",
        "0:api_versions.api_keys[api_key=68].max_version: kafka=0 odradek=1",
        "0:api_versions.api_keys[api_key=69].max_version: kafka=0 odradek=1",
        "0:api_versions.api_keys[api_key=6]: kafka={'api_key': 6, 'min_version': 0, 'max_version': 8} odradek='<missing>'",
        "0:api_versions.api_keys[api_key=75]: kafka='<missing>' odradek={'api_key': 75, 'min_version': 0, 'max_version': 0}",
        "0:api_versions.api_keys[api_key=76]: kafka='<missing>' odradek={'api_key': 76, 'min_version': 1, 'max_version': 1}",
        "0:api_versions.api_keys[api_key=77]: kafka='<missing>' odradek={'api_key': 77, 'min_version': 1, 'max_version': 1}",
        "0:api_versions.api_keys[api_key=78]: kafka='<missing>' odradek={'api_key': 78, 'min_version': 1, 'max_version': 2}",
        "0:api_versions.api_keys[api_key=79]: kafka='<missing>' odradek={'api_key': 79, 'min_version': 1, 'max_version': 2}",
        "0:api_versions.api_keys[api_key=7]: kafka={'api_key': 7, 'min_version': 0, 'max_version': 3} odradek='<missing>'",
        "0:api_versions.api_keys[api_key=83]: kafka='<missing>' odradek={'api_key': 83, 'min_version': 0, 'max_version': 0}",
        "0:api_versions.api_keys[api_key=84]: kafka='<missing>' odradek={'api_key': 84, 'min_version': 0, 'max_version': 0}",
        "0:api_versions.api_keys[api_key=85]: kafka='<missing>' odradek={'api_key': 85, 'min_version': 0, 'max_version': 1}",
        "0:api_versions.api_keys[api_key=86]: kafka='<missing>' odradek={'api_key': 86, 'min_version': 0, 'max_version': 0}",
        "0:api_versions.api_keys[api_key=87]: kafka='<missing>' odradek={'api_key': 87, 'min_version': 0, 'max_version': 0}",
        "0:api_versions.api_keys[api_key=90]: kafka='<missing>' odradek={'api_key': 90, 'min_version': 0, 'max_version': 1}",
        "0:api_versions.api_keys[api_key=91]: kafka='<missing>' odradek={'api_key': 91, 'min_version': 0, 'max_version': 0}",
        "0:api_versions.api_keys[api_key=92]: kafka='<missing>' odradek={'api_key': 92, 'min_version': 0, 'max_version': 0}",
    ),
)


# case id -> the deviation it shows and the exact difference lines (kafka first, then odradek)
CASE_DEVIATIONS: dict[str, tuple[str, tuple[str, ...]]] = {
    "acl-denied/create-acls": (
        "error-message-presence",
        ("2:create_acls.results[0].error_message: kafka='<present>' odradek='<absent>'",),
    ),
    "acl-denied/delete-acls": (
        "error-message-presence",
        ("2:delete_acls.filter_results[0].error_message: kafka='<present>' odradek='<absent>'",),
    ),
    "acl-denied/describe-acls": (
        "error-message-presence",
        ("2:describe_acls.error_message: kafka='<present>' odradek='<absent>'",),
    ),
    "acl-denied/describe-scram": (
        "denied-request-shape",
        (
            "2:describe_user_scram_credentials.results: kafka=[{'user': '', 'error_code': 31, 'error_message': '<absent>', 'credential_infos': []}] odradek=[]",
        ),
    ),
    "api-versions/v0/ranges": _API_VERSIONS_RANGES,
    "api-versions/v1/ranges": _API_VERSIONS_RANGES,
    "api-versions/v2/ranges": _API_VERSIONS_RANGES,
    "api-versions/v3/ranges": _API_VERSIONS_RANGES,
    "controller/leader-and-isr-stale-epoch": (
        "controller-apis-single-node",
        (
            "2:leader_and_isr: kafka={'error_code': 11, 'partition_errors': [], 'topics': [{'partition_errors': {\"[topic_name='']\": {'topic_name': '', 'partition_index': 0, 'error_code': 11}}}]} odradek='<connection closed>'",
        ),
    ),
    "controller/stop-replica-stale-epoch": (
        "controller-apis-single-node",
        ("2:stop_replica: kafka={'error_code': 11, 'partition_errors': []} odradek='<connection closed>'",),
    ),
    "controller/update-metadata-stale-epoch": (
        "controller-apis-single-node",
        ("0:update_metadata: kafka={'error_code': 11} odradek='<connection closed>'",),
    ),
    "create-acls/any-operation": (
        "invalid-value-unknown-server-error",
        (
            "0:create_acls.results[0].error_code: kafka=-1 odradek=42",
            "0:create_acls.results[0].error_message: kafka='<absent>' odradek='<present>'",
        ),
    ),
    "create-acls/bad-principal": (
        "invalid-value-unknown-server-error",
        (
            "0:create_acls.results[0].error_code: kafka=-1 odradek=42",
            "0:create_acls.results[0].error_message: kafka='<absent>' odradek='<present>'",
        ),
    ),
    "create-acls/match-pattern": (
        "invalid-value-unknown-server-error",
        (
            "0:create_acls.results[0].error_code: kafka=-1 odradek=42",
            "0:create_acls.results[0].error_message: kafka='<absent>' odradek='<present>'",
        ),
    ),
    "create-acls/unknown-resource-type": (
        "invalid-value-unknown-server-error",
        (
            "0:create_acls.results[0].error_code: kafka=-1 odradek=42",
            "0:create_acls.results[0].error_message: kafka='<absent>' odradek='<present>'",
        ),
    ),
    "create-topics/config-listing": (
        "unlisted-topic-configs",
        (
            "0:create_topics.topics[name='t-create-topics-config-listing'].configs[name='message.format.version']: kafka={'name': 'message.format.version', 'value': '3.0-IV1', 'read_only': False, 'config_source': 5, 'is_sensitive': False} odradek='<missing>'",
            "0:create_topics.topics[name='t-create-topics-config-listing'].configs[name='remote.log.copy.disable']: kafka={'name': 'remote.log.copy.disable', 'value': 'false', 'read_only': False, 'config_source': 5, 'is_sensitive': False} odradek='<missing>'",
            "0:create_topics.topics[name='t-create-topics-config-listing'].configs[name='remote.log.delete.on.disable']: kafka={'name': 'remote.log.delete.on.disable', 'value': 'false', 'read_only': False, 'config_source': 5, 'is_sensitive': False} odradek='<missing>'",
        ),
    ),
    "delete-records/then-fetch-deleted": (
        "fetch-error-offsets",
        (
            "4:fetch.responses[topic='t-delete-records-then-fetch-deleted'].partitions[partition_index=0].high_watermark: kafka=-1 odradek=4",
            "4:fetch.responses[topic='t-delete-records-then-fetch-deleted'].partitions[partition_index=0].last_stable_offset: kafka=-1 odradek=4",
            "4:fetch.responses[topic='t-delete-records-then-fetch-deleted'].partitions[partition_index=0].log_start_offset: kafka=-1 odradek=3",
        ),
    ),
    "describe-configs/broker-logger-type": (
        "no-broker-loggers",
        (
            "0:describe_configs.results[resource_name='1'].error_code: kafka=0 odradek=42",
            "0:describe_configs.results[resource_name='1'].error_message: kafka='<absent>' odradek='<present>'",
        ),
    ),
    "describe-configs/topic-all-strict": (
        "unlisted-topic-configs",
        (
            "2:describe_configs.results[resource_name='t-describe-configs-topic-all-strict'].configs[name='message.format.version']: kafka={'name': 'message.format.version', 'value': '3.0-IV1', 'read_only': False, 'is_default': False, 'config_source': 5, 'is_sensitive': False, 'synonyms': [], 'config_type': 2, 'documentation': None} odradek='<missing>'",
            "2:describe_configs.results[resource_name='t-describe-configs-topic-all-strict'].configs[name='remote.log.copy.disable']: kafka={'name': 'remote.log.copy.disable', 'value': 'false', 'read_only': False, 'is_default': False, 'config_source': 5, 'is_sensitive': False, 'synonyms': [], 'config_type': 1, 'documentation': None} odradek='<missing>'",
            "2:describe_configs.results[resource_name='t-describe-configs-topic-all-strict'].configs[name='remote.log.delete.on.disable']: kafka={'name': 'remote.log.delete.on.disable', 'value': 'false', 'read_only': False, 'is_default': False, 'config_source': 5, 'is_sensitive': False, 'synonyms': [], 'config_type': 1, 'documentation': None} odradek='<missing>'",
        ),
    ),
    "describe-configs/topic-synonyms": (
        "describe-configs-synonyms",
        (
            "2:describe_configs.results[resource_name='t-describe-configs-topic-synonyms'].configs[name='retention.ms'].synonyms: kafka=[] odradek={\"[name='log.retention.hours']\": {'name': 'log.retention.hours', 'value': '168', 'source': 5}}",
        ),
    ),
    "describe-configs/topic-unknown": (
        "error-message-presence",
        (
            "0:describe_configs.results[resource_name='no-t-describe-configs-topic-unknown'].error_message: kafka='<absent>' odradek='<present>'",
        ),
    ),
    "describe-configs/v0/topic-keys": (
        "describe-configs-v0-is-default",
        (
            "2:describe_configs.results[resource_name='t-describe-configs-v0-topic-keys'].configs[name='cleanup.policy'].is_default: kafka=False odradek=True",
            "2:describe_configs.results[resource_name='t-describe-configs-v0-topic-keys'].configs[name='max.message.bytes'].is_default: kafka=False odradek=True",
            "2:describe_configs.results[resource_name='t-describe-configs-v0-topic-keys'].configs[name='min.insync.replicas'].is_default: kafka=False odradek=True",
            "2:describe_configs.results[resource_name='t-describe-configs-v0-topic-keys'].configs[name='retention.ms'].is_default: kafka=False odradek=True",
            "2:describe_configs.results[resource_name='t-describe-configs-v0-topic-keys'].configs[name='segment.bytes'].is_default: kafka=False odradek=True",
        ),
    ),
    "describe-groups/after-join-without-protocol-type": (
        "failed-request-creates-no-group",
        (
            "2:describe_groups.groups[group_id='g-describe-groups-after-join-without-protocol-type'].group_state: kafka='Empty' odradek='Dead'",
        ),
    ),
    "describe-groups/after-join-without-protocols": (
        "failed-request-creates-no-group",
        (
            "2:describe_groups.groups[group_id='g-describe-groups-after-join-without-protocols'].group_state: kafka='Empty' odradek='Dead'",
        ),
    ),
    "describe-groups/after-too-large-commit": (
        "failed-request-creates-no-group",
        (
            "4:describe_groups.groups[group_id='g-describe-groups-after-too-large-commit'].group_state: kafka='Empty' odradek='Dead'",
        ),
    ),
    "fetch/offset-out-of-range-above": (
        "fetch-error-offsets",
        (
            "3:fetch.responses[topic='t-fetch-offset-out-of-range-above'].partitions[partition_index=0].high_watermark: kafka=-1 odradek=2",
            "3:fetch.responses[topic='t-fetch-offset-out-of-range-above'].partitions[partition_index=0].last_stable_offset: kafka=-1 odradek=2",
            "3:fetch.responses[topic='t-fetch-offset-out-of-range-above'].partitions[partition_index=0].log_start_offset: kafka=-1 odradek=0",
        ),
    ),
    "fetch/offset-out-of-range-negative": (
        "fetch-error-offsets",
        (
            "3:fetch.responses[topic='t-fetch-offset-out-of-range-negative'].partitions[partition_index=0].high_watermark: kafka=-1 odradek=2",
            "3:fetch.responses[topic='t-fetch-offset-out-of-range-negative'].partitions[partition_index=0].last_stable_offset: kafka=-1 odradek=2",
            "3:fetch.responses[topic='t-fetch-offset-out-of-range-negative'].partitions[partition_index=0].log_start_offset: kafka=-1 odradek=0",
        ),
    ),
    "idempotent/epoch-bump-bad-sequence": (
        "produce-error-answer",
        (
            "4:produce.responses[name='t-idempotent-epoch-bump-bad-sequence'].partition_responses[index=0].error_message: kafka='<absent>' odradek='<present>'",
            "4:produce.responses[name='t-idempotent-epoch-bump-bad-sequence'].partition_responses[index=0].log_start_offset: kafka=0 odradek=-1",
        ),
    ),
    "idempotent/sequence-gap": (
        "produce-error-answer",
        (
            "4:produce.responses[name='t-idempotent-sequence-gap'].partition_responses[index=0].error_message: kafka='<absent>' odradek='<present>'",
            "4:produce.responses[name='t-idempotent-sequence-gap'].partition_responses[index=0].log_start_offset: kafka=0 odradek=-1",
        ),
    ),
    "incremental-alter-configs/bad-operation": (
        "invalid-value-unknown-server-error",
        (
            "2:incremental_alter_configs.responses[resource_name='t-incremental-alter-configs-bad-operation'].error_code: kafka=-1 odradek=42",
            "2:incremental_alter_configs.responses[resource_name='t-incremental-alter-configs-bad-operation'].error_message: kafka='<absent>' odradek='<present>'",
        ),
    ),
    "list-offsets/v0": (
        "list-offsets-v0",
        (
            "3:list_offsets.topics[name='t-list-offsets-v0'].partitions[partition_index=0].error_code: kafka=0 odradek=35",
            "3:list_offsets.topics[name='t-list-offsets-v0'].partitions[partition_index=0].old_style_offsets: kafka=[1] odradek=[]",
        ),
    ),
    "metadata/auto-create": (
        "auto-create-synchronous",
        (
            "0:metadata.topics[name='t-metadata-auto-create'].error_code: kafka=5 odradek=0",
            "0:metadata.topics[name='t-metadata-auto-create'].partitions: kafka=[] odradek={'[partition_index=0]': {'error_code': 0, 'partition_index': 0, 'leader_id': 1, 'leader_epoch': 0, 'replica_nodes': [1], 'isr_nodes': [1], 'offline_replicas': []}}",
        ),
    ),
    "produce/bad-crc": (
        "produce-error-answer",
        (
            "2:produce.responses[name='t-produce-bad-crc'].partition_responses[index=0].error_message: kafka='<absent>' odradek='<present>'",
        ),
    ),
    "produce/compact-without-key": (
        "produce-error-answer",
        (
            "2:produce.responses[name='t-produce-compact-without-key'].partition_responses[index=0].log_start_offset: kafka=0 odradek=-1",
            "2:produce.responses[name='t-produce-compact-without-key'].partition_responses[index=0].record_errors: kafka=[{'batch_index': 0, 'batch_index_error_message': '<present>'}] odradek=[]",
        ),
    ),
    "produce/empty-records": (
        "produce-error-answer",
        (
            "2:produce.responses[name='t-produce-empty-records'].partition_responses[index=0].error_message: kafka='<absent>' odradek='<present>'",
        ),
    ),
    "produce/internal-topic": (
        "produce-error-answer",
        (
            "0:produce.responses[name='__consumer_offsets'].partition_responses[index=0].error_message: kafka='<absent>' odradek='<present>'",
        ),
    ),
    "produce/invalid-name": (
        "produce-error-answer",
        (
            "0:produce.responses[name='bad/t-produce-invalid-name'].partition_responses[index=0].error_message: kafka='<absent>' odradek='<present>'",
        ),
    ),
    "produce/negative-partition": (
        "produce-error-answer",
        (
            "2:produce.responses[name='t-produce-negative-partition'].partition_responses[index=-1].error_message: kafka='<absent>' odradek='<present>'",
        ),
    ),
    "produce/oversized-batch": (
        "produce-error-answer",
        (
            "2:produce.responses[name='t-produce-oversized-batch'].partition_responses[index=0].error_message: kafka='<absent>' odradek='<present>'",
        ),
    ),
    "produce/timestamp-too-old": (
        "produce-error-answer",
        (
            "2:produce.responses[name='t-produce-timestamp-too-old'].partition_responses[index=0].log_start_offset: kafka=0 odradek=-1",
            "2:produce.responses[name='t-produce-timestamp-too-old'].partition_responses[index=0].record_errors: kafka=[{'batch_index': 0, 'batch_index_error_message': '<present>'}] odradek=[]",
        ),
    ),
    "produce/truncated-batch": (
        "truncated-batch-corrupt",
        (
            "2:produce.responses[name='t-produce-truncated-batch'].partition_responses[index=0].error_code: kafka=87 odradek=2",
            "2:produce.responses[name='t-produce-truncated-batch'].partition_responses[index=0].error_message: kafka='<absent>' odradek='<present>'",
        ),
    ),
    "produce/unknown-partition": (
        "produce-error-answer",
        (
            "2:produce.responses[name='t-produce-unknown-partition'].partition_responses[index=7].error_message: kafka='<absent>' odradek='<present>'",
        ),
    ),
    "produce/unknown-topic": (
        "produce-error-answer",
        (
            "0:produce.responses[name='no-t-produce-unknown-topic'].partition_responses[index=0].error_message: kafka='<absent>' odradek='<present>'",
        ),
    ),
    "unserved/describe-topic-partitions": (
        "api-versions-ranges",
        (
            "2:describe_topic_partitions: kafka='<connection closed>' odradek={'topics': {\"[name='t-unserved-describe-topic-partitions']\": {'error_code': 0, 'name': 't-unserved-describe-topic-partitions', 'is_internal': False, 'partitions': {'[partition_index=0]': {'error_code': 0, 'partition_index': 0, 'leader_id': 1, 'leader_epoch': 0, 'replica_nodes': [1], 'isr_nodes': [1], 'eligible_leader_replicas': [], 'last_known_elr': [], 'offline_replicas': []}}, 'topic_authorized_operations': 3576}}, 'next_cursor': None}",
        ),
    ),
    "unserved/consumer-group-heartbeat": (
        "consumer-group-protocol",
        (
            "0:consumer_group_heartbeat.error_code: kafka=35 odradek=42",
            "0:consumer_group_heartbeat.error_message: kafka='<absent>' odradek='<present>'",
        ),
    ),
    "compression/topic-gzip-recompresses": (
        "compression-as-produced",
        (
            "3:fetch.responses[topic='t-compression-topic-gzip-recompresses'].partitions[partition_index=0].records[0].attributes: kafka=1 odradek=0",
            "3:fetch.responses[topic='t-compression-topic-gzip-recompresses'].partitions[partition_index=0].records[0].batch_length: kafka=91 odradek=79",
        ),
    ),
    "compression/topic-uncompressed-decompresses": (
        "compression-as-produced",
        (
            "3:fetch.responses[topic='t-compression-topic-uncompressed-decompresses'].partitions[partition_index=0].records[0].attributes: kafka=0 odradek=3",
            "3:fetch.responses[topic='t-compression-topic-uncompressed-decompresses'].partitions[partition_index=0].records[0].batch_length: kafka=79 odradek=98",
        ),
    ),
    "compression/zstd-on-old-produce-version": (
        "zstd-before-produce-v7",
        (
            "2:produce.responses[name='t-compression-zstd-on-old-produce-version'].partition_responses[index=0].base_offset: kafka=-1 odradek=0",
            "2:produce.responses[name='t-compression-zstd-on-old-produce-version'].partition_responses[index=0].error_code: kafka=76 odradek=0",
            "2:produce.responses[name='t-compression-zstd-on-old-produce-version'].partition_responses[index=0].log_start_offset: kafka=-1 odradek=0",
        ),
    ),
}


# case id -> the fix that made it match
CASE_FIXES: dict[str, str] = {
    "acl-denied/describe-producers": "describe-producers-unknown-message",
    "acl-denied/alter-client-quotas": "client-quotas-messages",
    "client-quotas/describe-bad-type": "client-quotas-messages",
    "acl-denied/alter-reassignments": "reassignments-denied-shape",
    "acl-denied/list-reassignments": "reassignments-denied-shape",
    "txn-offset-commit/without-add-offsets": "txn-offset-commit-verified",
    "txn-offset-commit/fenced-epoch": "txn-offset-commit-verified",
    "acl-denied/delete-topics": "delete-topics-unknown-message",
    "acl-denied/create-topics": "create-topics-denied-config-error",
    "acl-denied/alter-configs": "alter-configs-denied-message",
    "acl-denied/incremental-alter-configs": "alter-configs-denied-message",
    "elect-leaders/preferred-not-needed": "elect-leaders-not-needed-message",
    "elect-leaders/unclean": "elect-leaders-not-needed-message",
    "elect-leaders/v0": "elect-leaders-not-needed-message",
    "elect-leaders/v1": "elect-leaders-not-needed-message",
    "api-versions/bad-client-name": "api-versions-invalid-empty",
    "find-coordinator/v1/group": "find-coordinator-none-message",
    "find-coordinator/v2/group": "find-coordinator-none-message",
    "find-coordinator/v3/group": "find-coordinator-none-message",
    "find-coordinator/v1/transaction": "find-coordinator-none-message",
    "create-topics/already-exists": "create-topics-error-configs",
    "create-topics/duplicate-in-request": "create-topics-error-configs",
    "create-topics/zero-partitions": "create-topics-error-configs",
    "create-topics/negative-partitions": "create-topics-error-configs",
    "create-topics/replication-factor-too-big": "create-topics-error-configs",
    "create-topics/replication-factor-zero": "create-topics-error-configs",
    "create-topics/invalid-name-chars": "create-topics-error-configs",
    "create-topics/name-dot": "create-topics-error-configs",
    "create-topics/name-dotdot": "create-topics-error-configs",
    "create-topics/name-empty": "create-topics-error-configs",
    "create-topics/name-too-long": "create-topics-error-configs",
    "create-topics/unknown-config": "create-topics-error-configs",
    "create-topics/bad-config-value": "create-topics-error-configs",
    "create-topics/bad-cleanup-policy": "create-topics-error-configs",
    "create-topics/min-isr-above-rf": "create-topics-error-configs",
    "create-topics/bad-compression": "create-topics-error-configs",
    "create-topics/internal-name": "create-topics-error-configs",
    "create-topics/validate-only-bad-config": "create-topics-error-configs",
    "delete-topics/unknown": "delete-topics-unknown-message",
    "delete-topics/one-known-one-unknown": "delete-topics-unknown-message",
    "delete-topics/twice": "delete-topics-unknown-message",
    "fetch/unknown-topic": "fetch-refused-aborted-list",
    "fetch/unknown-topic-v4": "fetch-refused-aborted-list",
    "fetch/unknown-partition": "fetch-refused-aborted-list",
    "idempotent/describe-producers-unknown-topic": "describe-producers-unknown-message",
}
