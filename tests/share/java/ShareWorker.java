/*
 * One Java KafkaShareConsumer as its own process: the Java twin of tests/share/share_worker.py,
 * with the same arguments and the same output lines (R, A, E, H, C), so tests/share reads both
 * the same way. Run as a single source file:
 *
 *   java -cp '<kafka jars>/*' tests/share/java/ShareWorker.java --bootstrap B --topic T
 *        --group G --mode implicit|explicit --out FILE --stop FILE [--hold] [--script RULE] [--values]
 * With --values each record's value is also written as "V partition offset VALUE".
 * With --script (explicit mode) each acknowledgement is also written as "K partition offset TYPE".
 */

import java.io.FileWriter;
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.stream.Collectors;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class ShareWorker {
    /**
     * The acknowledgement a --script rule gives a record (explicit mode): "release-reject" releases
     * offset % 3 == 1 on its first delivery and rejects offset % 3 == 2; "poison=N" releases offset N
     * every time; everything else, and every record without a script, is accepted.
     */
    static AcknowledgeType scripted(String script, long offset, short deliveryCount) {
        if (script.equals("release-reject")) {
            if (offset % 3 == 1 && deliveryCount == 1) {
                return AcknowledgeType.RELEASE;
            }
            return offset % 3 == 2 ? AcknowledgeType.REJECT : AcknowledgeType.ACCEPT;
        }
        if (script.startsWith("poison=") && offset == Long.parseLong(script.substring(7))) {
            return AcknowledgeType.RELEASE;
        }
        if (!script.isEmpty() && !script.equals("release-reject") && !script.startsWith("poison=")) {
            throw new IllegalArgumentException("--script " + script + ": use release-reject or poison=<offset>");
        }
        return AcknowledgeType.ACCEPT;
    }

    public static void main(String[] argv) throws IOException, InterruptedException {
        Map<String, String> args = new HashMap<>();
        boolean hold = false;
        boolean values = false;
        for (int i = 0; i < argv.length; i++) {
            if (argv[i].equals("--hold")) {
                hold = true;
            } else if (argv[i].equals("--values")) {
                values = true;
            } else {
                args.put(argv[i].substring(2), argv[++i]);
            }
        }
        String mode = hold ? "explicit" : args.getOrDefault("mode", "implicit");
        boolean explicit = mode.equals("explicit");
        String script = args.getOrDefault("script", "");
        Properties props = new Properties();
        props.put("bootstrap.servers", args.get("bootstrap"));
        props.put("group.id", args.get("group"));
        props.put("share.acknowledgement.mode", mode);
        Path stop = Path.of(args.get("stop"));
        try (PrintWriter out = new PrintWriter(new FileWriter(args.get("out"), true));
             KafkaShareConsumer<byte[], byte[]> consumer =
                 new KafkaShareConsumer<>(props, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            // Called on this thread from poll, commit and close: what the broker confirmed or refused.
            consumer.setAcknowledgementCommitCallback((Map<TopicIdPartition, Set<Long>> offsets, Exception exc) -> {
                for (Map.Entry<TopicIdPartition, Set<Long>> e : offsets.entrySet()) {
                    if (e.getValue().isEmpty()) {
                        continue;
                    }
                    String listed = new TreeSet<>(e.getValue()).stream().map(String::valueOf)
                        .collect(Collectors.joining(","));
                    int partition = e.getKey().partition();
                    if (exc == null) {
                        out.println("A " + partition + " " + listed);
                    } else {
                        out.println("E " + partition + " " + exc.getClass().getSimpleName() + " " + listed);
                    }
                }
                out.flush();
            });
            consumer.subscribe(List.of(args.get("topic")));
            while (!Files.exists(stop)) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(500));
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    out.println("R " + r.partition() + " " + r.offset() + " " + r.deliveryCount().orElse((short) 0));
                    if (values) {
                        // The value as text (the tests write UTF-8 without spaces).
                        out.println("V " + r.partition() + " " + r.offset() + " "
                            + new String(r.value(), java.nio.charset.StandardCharsets.UTF_8));
                    }
                    if (explicit && !hold) {
                        AcknowledgeType kind = scripted(script, r.offset(), r.deliveryCount().orElse((short) 0));
                        if (!script.isEmpty()) {
                            // The commit callback lists offsets of every type: say which was given.
                            out.println("K " + r.partition() + " " + r.offset() + " " + kind.name());
                        }
                        consumer.acknowledge(r, kind);
                    }
                }
                out.flush();
                if (hold && !records.isEmpty()) {
                    // Keep the locks: never acknowledge, never poll again, until SIGKILL.
                    out.println("H");
                    out.flush();
                    Thread.sleep(Long.MAX_VALUE);
                }
                if (explicit && !records.isEmpty()) {
                    consumer.commitAsync();
                }
            }
            consumer.close();
            out.println("C");
        }
    }
}
