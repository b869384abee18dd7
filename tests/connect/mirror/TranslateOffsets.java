// Kafka's RemoteClusterUtils.translateOffsets, run as a single-file source program
// (`java -cp <connect-mirror jars> TranslateOffsets.java <bootstrap> <remote alias> <group>`)
// by tests/connect/mirror/test_mirror_remote_cluster_utils.py. Prints one line per
// partition, "<topic> <partition> <offset>", on stdout (logging goes to stderr).
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;

import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.connect.mirror.RemoteClusterUtils;

public class TranslateOffsets {
    public static void main(String[] args) throws Exception {
        Map<String, Object> props = new HashMap<>();
        props.put("bootstrap.servers", args[0]);
        Map<TopicPartition, OffsetAndMetadata> translated =
                RemoteClusterUtils.translateOffsets(props, args[1], args[2], Duration.ofSeconds(30));
        for (Map.Entry<TopicPartition, OffsetAndMetadata> e : translated.entrySet()) {
            System.out.println(e.getKey().topic() + " " + e.getKey().partition() + " " + e.getValue().offset());
        }
    }
}
