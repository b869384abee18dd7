// Prints what Kafka 4.3.1's MirrorMaker gives each herder's worker. stdin holds several
// mm2.properties, each after a line "### NAME FLOW..." (flows as "A->B"); for each flow it prints
// MirrorMakerConfig.workerConfig as "NAME FLOW key=value" lines (sorted), then
// "NAME FLOW *key=value" for the values DistributedConfig resolves from it (what the worker
// actually runs with). One JVM for all. Used by test_mm2_worker_keys.py.
import java.io.StringReader;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.stream.Collectors;

import org.apache.kafka.connect.mirror.MirrorMakerConfig;
import org.apache.kafka.connect.mirror.SourceAndTarget;
import org.apache.kafka.connect.runtime.distributed.DistributedConfig;

public class KafkaMirrorWorkerConfig {
    static final String[] RESOLVED = {"offset.flush.interval.ms", "offset.flush.timeout.ms", "rebalance.timeout.ms",
                                      "session.timeout.ms", "heartbeat.interval.ms", "task.shutdown.graceful.timeout.ms"};

    public static void main(String[] args) throws Exception {
        String text = new BufferedReader(new InputStreamReader(System.in)).lines().collect(Collectors.joining("\n"));
        for (String block : text.split("(?m)^### ")) {
            if (block.isBlank()) continue;
            int eol = block.indexOf('\n');
            String[] head = block.substring(0, eol).trim().split(" ");
            Properties p = new Properties();
            p.load(new StringReader(block.substring(eol + 1)));
            Map<String, String> props = new HashMap<>();
            for (String k : p.stringPropertyNames()) props.put(k, p.getProperty(k));
            MirrorMakerConfig config = new MirrorMakerConfig(props);
            for (int i = 1; i < head.length; i++) {
                String flow = head[i];
                String[] st = flow.split("->");
                Map<String, String> worker = config.workerConfig(new SourceAndTarget(st[0], st[1]));
                for (Map.Entry<String, String> e : new TreeMap<>(worker).entrySet()) {
                    System.out.println(head[0] + " " + flow + " " + e.getKey() + "=" + e.getValue());
                }
                DistributedConfig resolved = new DistributedConfig(worker);
                for (String k : RESOLVED) {
                    System.out.println(head[0] + " " + flow + " *" + k + "=" + resolved.values().get(k));
                }
            }
        }
    }
}
