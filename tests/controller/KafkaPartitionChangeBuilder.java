// Runs Kafka 4.3.1's own org.apache.kafka.controller.PartitionChangeBuilder (kafka-metadata jar)
// on the cases read from stdin, one a line:
//   NAME REPLICAS ISR LEADER ELR LAST_KNOWN_ELR RECOVERY ACCEPTABLE MIN_ISR ELR_ON ELECTION TARGET_ISR UNCLEAN_SHUTDOWN LKL
// (lists comma-separated, "x" for an empty one, "-" for "not set"), and prints per case
//   NAME none | NAME isr=.. leader=.. elr=.. lke=.. lrs=.. replicas=..  (a null field as "null").
// Used by test_partition_change_reference.py.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.HashSet;

import org.apache.kafka.common.DirectoryId;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.metadata.PartitionChangeRecord;
import org.apache.kafka.controller.PartitionChangeBuilder;
import org.apache.kafka.metadata.LeaderRecoveryState;
import org.apache.kafka.metadata.PartitionRegistration;
import org.apache.kafka.server.common.ApiMessageAndVersion;
import org.apache.kafka.server.common.MetadataVersion;

public class KafkaPartitionChangeBuilder {
    static int[] ints(String s) {
        if (s.equals("x")) return new int[0];
        String[] parts = s.split(",");
        int[] out = new int[parts.length];
        for (int i = 0; i < parts.length; i++) out[i] = Integer.parseInt(parts[i]);
        return out;
    }

    static List<Integer> list(String s) {
        List<Integer> out = new ArrayList<>();
        for (int v : ints(s)) out.add(v);
        return out;
    }

    static String show(List<?> l) {
        if (l == null) return "null";
        if (l.isEmpty()) return "x";
        StringBuilder b = new StringBuilder();
        for (Object o : l) { if (b.length() > 0) b.append(','); b.append(o); }
        return b.toString();
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        Uuid topicId = Uuid.fromString("FbrrdcfiR-KC2CPSTHaJrg");
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) continue;
            String[] f = line.split(" ");
            int[] replicas = ints(f[1]);
            PartitionRegistration partition = new PartitionRegistration.Builder()
                .setReplicas(replicas)
                .setDirectories(DirectoryId.unassignedArray(replicas.length))
                .setIsr(ints(f[2]))
                .setLeader(Integer.parseInt(f[3]))
                .setElr(ints(f[4]))
                .setLastKnownElr(ints(f[5]))
                .setLeaderRecoveryState(LeaderRecoveryState.of(Byte.parseByte(f[6])))
                .setLeaderEpoch(100)
                .setPartitionEpoch(200)
                .build();
            Set<Integer> acceptable = new HashSet<>(list(f[7]));
            PartitionChangeBuilder builder = new PartitionChangeBuilder(partition, topicId, 0,
                acceptable::contains, MetadataVersion.latestProduction(), Integer.parseInt(f[8]),
                Boolean.parseBoolean(f[9]))
                .setElection(PartitionChangeBuilder.Election.valueOf(f[10]))
                .setDefaultDirProvider(id -> DirectoryId.UNASSIGNED)
                .setUseLastKnownLeaderInBalancedRecovery(Boolean.parseBoolean(f[13]));
            if (!f[11].equals("-")) builder.setTargetIsr(list(f[11]));
            if (!f[12].equals("-")) builder.setUncleanShutdownReplicas(list(f[12]));
            Optional<ApiMessageAndVersion> built = builder.build();
            if (built.isEmpty()) {
                System.out.println(f[0] + " none");
                continue;
            }
            PartitionChangeRecord r = (PartitionChangeRecord) built.get().message();
            System.out.println(f[0] + " isr=" + show(r.isr()) + " leader=" + r.leader()
                + " elr=" + show(r.eligibleLeaderReplicas()) + " lke=" + show(r.lastKnownElr())
                + " lrs=" + r.leaderRecoveryState() + " replicas=" + show(r.replicas()));
        }
    }
}
