// Prints Kafka 4.3.1's group metadata hashes (KIP-1101): Utils.computeTopicHash of each topic of a
// metadata image, and ModernGroup.computeMetadataHash of subscriptions, for test_metadata_hash_reference.py.
//
// stdin:  TOPIC <name> <msb> <lsb> <partitions> | GROUP <name>,<name>,...
// stdout: TOPIC <name> <hash> | GROUP <names> <hash>

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.metadata.PartitionRecord;
import org.apache.kafka.common.metadata.TopicRecord;
import org.apache.kafka.coordinator.common.runtime.KRaftCoordinatorMetadataImage;
import org.apache.kafka.coordinator.group.Utils;
import org.apache.kafka.coordinator.group.modern.ModernGroup;
import org.apache.kafka.coordinator.group.modern.SubscriptionCount;
import org.apache.kafka.image.MetadataDelta;
import org.apache.kafka.image.MetadataImage;
import org.apache.kafka.image.MetadataProvenance;

public class KafkaMetadataHash {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        MetadataDelta delta = new MetadataDelta.Builder().setImage(MetadataImage.EMPTY).build();
        List<String> names = new ArrayList<>();
        List<String[]> groups = new ArrayList<>();
        String line;
        while ((line = in.readLine()) != null) {
            String[] f = line.trim().split(" ");
            if (f[0].equals("TOPIC")) {
                Uuid id = new Uuid(Long.parseLong(f[2]), Long.parseLong(f[3]));
                delta.replay(new TopicRecord().setName(f[1]).setTopicId(id));
                for (int p = 0; p < Integer.parseInt(f[4]); p++)
                    delta.replay(new PartitionRecord().setTopicId(id).setPartitionId(p)
                        .setReplicas(List.of(1)).setIsr(List.of(1)).setLeader(1));
                names.add(f[1]);
            } else if (f[0].equals("GROUP")) {
                groups.add(f[1].split(","));
            }
        }
        KRaftCoordinatorMetadataImage image = new KRaftCoordinatorMetadataImage(delta.apply(MetadataProvenance.EMPTY));
        StringBuilder out = new StringBuilder();
        for (String name : names)
            out.append("TOPIC ").append(name).append(' ').append(Utils.computeTopicHash(name, image)).append('\n');
        for (String[] g : groups) {
            Map<String, SubscriptionCount> subscribed = new HashMap<>();
            for (String name : g)
                subscribed.put(name, new SubscriptionCount(1, 0));
            long hash = ModernGroup.computeMetadataHash(subscribed, new HashMap<>(), image);
            out.append("GROUP ").append(String.join(",", g)).append(' ').append(hash).append('\n');
        }
        System.out.print(out);
    }
}
