// Kafka 4.3.1's own bytes for a fixed set of metadata records (test_records_kafka_bytes.py builds
// the same records with strom and compares): one line per record, "<label> <hex of the
// ApiMessageAndVersion value as MetadataRecordSerde writes it>". Run as a single-file program
// with Kafka's jars on the class path.
import java.nio.ByteBuffer;
import java.util.List;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.metadata.*;
import org.apache.kafka.common.protocol.ApiMessage;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.protocol.ObjectSerializationCache;
import org.apache.kafka.metadata.MetadataRecordSerde;
import org.apache.kafka.server.common.ApiMessageAndVersion;

public class KafkaRecordBytes {
    static final Uuid U1 = new Uuid(0x0102030405060708L, 0x090a0b0c0d0e0f10L);
    static final Uuid U2 = new Uuid(0x1112131415161718L, 0x191a1b1c1d1e1f20L);

    static void out(String label, ApiMessage m, int version) {
        ObjectSerializationCache cache = new ObjectSerializationCache();
        ApiMessageAndVersion amv = new ApiMessageAndVersion(m, (short) version);
        int size = MetadataRecordSerde.INSTANCE.recordSize(amv, cache);
        ByteBuffer buf = ByteBuffer.allocate(size);
        MetadataRecordSerde.INSTANCE.write(amv, cache, new ByteBufferAccessor(buf));
        StringBuilder sb = new StringBuilder();
        for (byte b : buf.array()) sb.append(String.format("%02x", b));
        System.out.println(label + " " + sb);
    }

    public static void main(String[] args) {
        RegisterBrokerRecord.BrokerEndpointCollection eps = new RegisterBrokerRecord.BrokerEndpointCollection();
        eps.add(new RegisterBrokerRecord.BrokerEndpoint().setName("PLAINTEXT").setHost("localhost").setPort(9092)
            .setSecurityProtocol((short) 0));
        RegisterBrokerRecord.BrokerFeatureCollection feats = new RegisterBrokerRecord.BrokerFeatureCollection();
        feats.add(new RegisterBrokerRecord.BrokerFeature().setName("metadata.version")
            .setMinSupportedVersion((short) 7).setMaxSupportedVersion((short) 30));
        out("register_broker_v4", new RegisterBrokerRecord().setBrokerId(1).setIncarnationId(U1).setBrokerEpoch(42)
            .setEndPoints(eps).setFeatures(feats).setRack(null).setFenced(true).setInControlledShutdown(false)
            .setLogDirs(List.of(U2)).setCordonedLogDirs(List.of(U1)), 4);
        out("unregister_broker", new UnregisterBrokerRecord().setBrokerId(3).setBrokerEpoch(99), 0);
        out("fence_broker", new FenceBrokerRecord().setId(1).setEpoch(7), 0);
        out("unfence_broker", new UnfenceBrokerRecord().setId(1).setEpoch(7), 0);
        out("broker_registration_change_v3", new BrokerRegistrationChangeRecord().setBrokerId(1).setBrokerEpoch(42)
            .setFenced((byte) 1).setInControlledShutdown((byte) 1).setLogDirs(List.of(U1)), 3);
        out("broker_registration_change_v1", new BrokerRegistrationChangeRecord().setBrokerId(1).setBrokerEpoch(42)
            .setFenced((byte) -1), 1);
        out("partition_change_elr", new PartitionChangeRecord().setPartitionId(0).setTopicId(U1).setLeader(-1)
            .setIsr(List.of()).setEligibleLeaderReplicas(List.of(1)).setLastKnownElr(List.of()), 2);
        out("partition_v2", new PartitionRecord().setPartitionId(2).setTopicId(U1).setReplicas(List.of(1))
            .setIsr(List.of()).setLeader(-1).setLeaderEpoch(5).setPartitionEpoch(9).setDirectories(List.of(U2))
            .setEligibleLeaderReplicas(List.of(1)).setLastKnownElr(List.of()), 2);
        out("scram", new UserScramCredentialRecord().setName("alice").setMechanism((byte) 1)
            .setSalt(new byte[] {1, 2, 3}).setStoredKey(new byte[] {4, 5}).setServerKey(new byte[] {6})
            .setIterations(4096), 0);
        out("remove_scram", new RemoveUserScramCredentialRecord().setName("alice").setMechanism((byte) 2), 0);
        out("acl", new AccessControlEntryRecord().setId(U1).setResourceType((byte) 2).setResourceName("t")
            .setPatternType((byte) 3).setPrincipal("User:bob").setHost("*").setOperation((byte) 3)
            .setPermissionType((byte) 3), 0);
        out("remove_acl", new RemoveAccessControlEntryRecord().setId(U2), 0);
        out("client_quota", new ClientQuotaRecord().setEntity(List.of(
                new ClientQuotaRecord.EntityData().setEntityType("user").setEntityName("bob"),
                new ClientQuotaRecord.EntityData().setEntityType("client-id").setEntityName(null)))
            .setKey("producer_byte_rate").setValue(1024.5).setRemove(false), 0);
        out("delegation_token", new DelegationTokenRecord().setOwner("User:a").setRequester("User:b")
            .setRenewers(List.of("User:c", "User:d")).setIssueTimestamp(1).setMaxTimestamp(2)
            .setExpirationTimestamp(3).setTokenId("tok"), 0);
        out("remove_delegation_token", new RemoveDelegationTokenRecord().setTokenId("tok"), 0);
        out("zk_migration_state", new ZkMigrationStateRecord().setZkMigrationState((byte) 0), 0);
        RegisterControllerRecord.ControllerEndpointCollection ceps = new RegisterControllerRecord.ControllerEndpointCollection();
        ceps.add(new RegisterControllerRecord.ControllerEndpoint().setName("CONTROLLER").setHost("localhost")
            .setPort(9093).setSecurityProtocol((short) 0));
        RegisterControllerRecord.ControllerFeatureCollection cfeats = new RegisterControllerRecord.ControllerFeatureCollection();
        cfeats.add(new RegisterControllerRecord.ControllerFeature().setName("kraft.version")
            .setMinSupportedVersion((short) 0).setMaxSupportedVersion((short) 1));
        out("register_controller", new RegisterControllerRecord().setControllerId(1).setIncarnationId(U2)
            .setZkMigrationReady(false).setEndPoints(ceps).setFeatures(cfeats), 0);
        out("abort_transaction", new AbortTransactionRecord().setReason("controller failover"), 0);
        out("clear_elr", new ClearElrRecord().setTopicName("t"), 0);
    }
}
