/*
 * ClientCheck: drives the official Java Kafka client (kafka-clients) against a broker and
 * prints what it observes as JSON lines, one object per line with an "op" field, so pytest
 * can compare strom with Apache Kafka. Compiled at test time against the kafka-clients jar
 * of the reference broker (scripts/java_client/java_client.py).
 *
 *   produce <bootstrap> <topic> <n> [--prop k=v]... [--partition p] [--value-bytes b]
 *   consume <bootstrap> <topic> <n> [--prop k=v]... [--timeout-ms t]
 *   admin   <bootstrap> <topic> [--prop k=v]...
 *
 * --prop sets a client property (acks, compression.type, enable.idempotence, ...). Record i
 * has key "key-<i>", a header seq=<i> and a value "value-<i>-" padded with a repeating
 * pattern to --value-bytes, so compression has something to squeeze and the consumer side
 * can recompute the expected record. Exit code 0 = the program ran (client errors are
 * reported as JSON), 2 = usage error or an unexpected exception ("op":"fatal").
 */

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReferenceArray;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.DeletedRecords;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public final class ClientCheck {

    private ClientCheck() {}

    // ---- JSON output (no JSON library: the program depends on kafka-clients only) ----------

    static String json(Object v) {
        StringBuilder sb = new StringBuilder();
        write(sb, v);
        return sb.toString();
    }

    @SuppressWarnings("unchecked")
    static void write(StringBuilder sb, Object v) {
        if (v == null) {
            sb.append("null");
        } else if (v instanceof String s) {
            sb.append('"');
            for (int i = 0; i < s.length(); i++) {
                char c = s.charAt(i);
                switch (c) {
                    case '"' -> sb.append("\\\"");
                    case '\\' -> sb.append("\\\\");
                    case '\n' -> sb.append("\\n");
                    case '\r' -> sb.append("\\r");
                    case '\t' -> sb.append("\\t");
                    default -> {
                        if (c < 0x20) sb.append(String.format("\\u%04x", (int) c));
                        else sb.append(c);
                    }
                }
            }
            sb.append('"');
        } else if (v instanceof Number || v instanceof Boolean) {
            sb.append(v);
        } else if (v instanceof Map<?, ?> m) {
            sb.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : m.entrySet()) {
                if (!first) sb.append(',');
                first = false;
                write(sb, String.valueOf(e.getKey()));
                sb.append(':');
                write(sb, e.getValue());
            }
            sb.append('}');
        } else if (v instanceof Collection<?> c) {
            sb.append('[');
            boolean first = true;
            for (Object o : c) {
                if (!first) sb.append(',');
                first = false;
                write(sb, o);
            }
            sb.append(']');
        } else {
            write(sb, v.toString());
        }
    }

    static Map<String, Object> obj(Object... kv) {
        Map<String, Object> m = new LinkedHashMap<>();
        for (int i = 0; i < kv.length; i += 2) m.put((String) kv[i], kv[i + 1]);
        return m;
    }

    static void emit(Map<String, Object> m) {
        System.out.println(json(m));
        System.out.flush();
    }

    /** The client exception a future failed with: class simple name + message. */
    static Map<String, Object> errorOf(Throwable t) {
        Throwable cause = (t instanceof ExecutionException && t.getCause() != null) ? t.getCause() : t;
        return obj("error", cause.getClass().getSimpleName(), "message", String.valueOf(cause.getMessage()));
    }

    // ---- arguments -------------------------------------------------------------------------

    static final class Args {
        final List<String> positional = new ArrayList<>();
        final Properties props = new Properties();
        final Map<String, String> options = new TreeMap<>();

        Args(String[] argv) {
            for (int i = 0; i < argv.length; i++) {
                String a = argv[i];
                if (a.equals("--prop")) {
                    String kv = argv[++i];
                    int eq = kv.indexOf('=');
                    if (eq <= 0) throw new IllegalArgumentException("--prop wants k=v, got " + kv);
                    props.setProperty(kv.substring(0, eq), kv.substring(eq + 1));
                } else if (a.startsWith("--")) {
                    options.put(a.substring(2), argv[++i]);
                } else {
                    positional.add(a);
                }
            }
        }

        String pos(int i, String name) {
            if (i >= positional.size()) throw new IllegalArgumentException("missing argument <" + name + ">");
            return positional.get(i);
        }

        int opt(String name, int dflt) {
            return options.containsKey(name) ? Integer.parseInt(options.get(name)) : dflt;
        }
    }

    // ---- the records every subcommand agrees on --------------------------------------------

    static String keyOf(int i) {
        return "key-" + i;
    }

    static String valueOf(int i, int size) {
        StringBuilder sb = new StringBuilder("value-").append(i).append('-');
        String pattern = "strom-kafka-compat-";
        while (sb.length() < size) sb.append(pattern.charAt(sb.length() % pattern.length()));
        return sb.toString();
    }

    // ---- produce ---------------------------------------------------------------------------

    static Properties producerProps(String bootstrap, Properties extra) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        // Fail in seconds, not minutes, when a broker does not answer.
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "20000");
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "30000");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.putAll(extra);
        return p;
    }

    static int produce(Args a) throws Exception {
        String bootstrap = a.pos(1, "bootstrap");
        String topic = a.pos(2, "topic");
        int n = Integer.parseInt(a.pos(3, "n"));
        int partition = a.opt("partition", -1);
        int valueBytes = a.opt("value-bytes", 100);
        AtomicReferenceArray<Object> results = new AtomicReferenceArray<>(n);
        CountDownLatch done = new CountDownLatch(n);
        Properties props = producerProps(bootstrap, a.props);
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            for (int i = 0; i < n; i++) {
                final int idx = i;
                ProducerRecord<String, String> rec = new ProducerRecord<>(
                        topic, partition < 0 ? null : partition, keyOf(i), valueOf(i, valueBytes));
                rec.headers().add("seq", Integer.toString(i).getBytes(StandardCharsets.UTF_8));
                try {
                    producer.send(rec, (RecordMetadata md, Exception e) -> {
                        results.set(idx, e != null ? e : md);
                        done.countDown();
                    });
                } catch (Exception e) {  // synchronous failures: metadata timeout, bad config
                    results.set(idx, e);
                    done.countDown();
                }
            }
            producer.flush();
            done.await(60, TimeUnit.SECONDS);
        }
        int errors = 0;
        for (int i = 0; i < n; i++) {
            Object r = results.get(i);
            Map<String, Object> line = obj("op", "sent", "i", i);
            if (r instanceof RecordMetadata md) {
                line.put("partition", md.partition());
                line.put("offset", md.offset());
                line.put("timestamp", md.timestamp());
            } else {
                errors++;
                line.putAll(r == null ? obj("error", "NoCallback", "message", "no callback in 60s")
                                      : errorOf((Throwable) r));
            }
            emit(line);
        }
        emit(obj("op", "produce", "count", n, "errors", errors,
                 "acks", props.getProperty(ProducerConfig.ACKS_CONFIG, "default"),
                 "idempotence", props.getProperty(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "default"),
                 "compression", props.getProperty(ProducerConfig.COMPRESSION_TYPE_CONFIG, "none")));
        return 0;
    }

    // ---- consume ---------------------------------------------------------------------------

    static int consume(Args a) {
        String bootstrap = a.pos(1, "bootstrap");
        String topic = a.pos(2, "topic");
        int n = Integer.parseInt(a.pos(3, "n"));
        long timeoutMs = a.opt("timeout-ms", 30000);
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
        p.putAll(a.props);
        int count = 0;
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(p)) {
            // No group: assign every partition and read from the log start.
            List<TopicPartition> tps = new ArrayList<>();
            for (PartitionInfo info : consumer.partitionsFor(topic, Duration.ofSeconds(20))) {
                tps.add(new TopicPartition(topic, info.partition()));
            }
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            long deadline = System.currentTimeMillis() + timeoutMs;
            while (count < n && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                    Map<String, Object> headers = new LinkedHashMap<>();
                    for (Header h : r.headers()) {
                        headers.put(h.key(), h.value() == null ? null : new String(h.value(), StandardCharsets.UTF_8));
                    }
                    emit(obj("op", "record", "partition", r.partition(), "offset", r.offset(),
                             "timestamp", r.timestamp(), "timestampType", r.timestampType().name,
                             "key", r.key(), "value", r.value(), "headers", headers,
                             "leaderEpoch", r.leaderEpoch().orElse(-1)));
                    count++;
                }
            }
            Map<String, Object> positions = new TreeMap<>();
            for (TopicPartition tp : tps) positions.put(Integer.toString(tp.partition()), consumer.position(tp));
            emit(obj("op", "consume", "count", count, "partitions", tps.size(), "positions", positions));
        }
        return 0;
    }

    // ---- admin -----------------------------------------------------------------------------

    interface Step {
        Map<String, Object> run() throws Exception;
    }

    /** Run one admin step and print {"op": name, ...result} or {"op": name, "error": ...}. */
    static void step(String name, Step s) {
        Map<String, Object> line = obj("op", name);
        try {
            line.putAll(s.run());
        } catch (Exception e) {
            line.putAll(errorOf(e));
        }
        emit(line);
    }

    static Map<String, Object> configsOf(Admin admin, String topic, Set<String> only) throws Exception {
        ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic);
        Config cfg = admin.describeConfigs(List.of(res)).all().get().get(res);
        Map<String, Object> out = new TreeMap<>();
        for (ConfigEntry e : cfg.entries()) {
            if (only != null && !only.contains(e.name())) continue;
            out.put(e.name(), obj("value", e.value(), "source", e.source().name(),
                                  "isDefault", e.isDefault(), "readOnly", e.isReadOnly(),
                                  "sensitive", e.isSensitive(), "type", e.type().name()));
        }
        return obj("configs", out);
    }

    static Map<String, Object> offsets(Admin admin, TopicPartition tp) throws Exception {
        Map<String, Object> out = new LinkedHashMap<>();
        Map<String, OffsetSpec> specs = new LinkedHashMap<>();
        specs.put("earliest", OffsetSpec.earliest());
        specs.put("latest", OffsetSpec.latest());
        specs.put("maxTimestamp", OffsetSpec.maxTimestamp());
        for (Map.Entry<String, OffsetSpec> e : specs.entrySet()) {
            ListOffsetsResult.ListOffsetsResultInfo info =
                    admin.listOffsets(Map.of(tp, e.getValue())).partitionResult(tp).get();
            out.put(e.getKey(), info.offset());
        }
        return out;
    }

    static int admin(Args a) throws Exception {
        String bootstrap = a.pos(1, "bootstrap");
        String topic = a.pos(2, "topic");
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        p.putAll(a.props);
        TopicPartition tp0 = new TopicPartition(topic, 0);
        ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic);
        try (Admin admin = Admin.create(p)) {
            step("describeCluster", () -> {
                Collection<Node> nodes = admin.describeCluster().nodes().get();
                List<Object> ids = new ArrayList<>();
                for (Node node : nodes) ids.add(node.id());
                return obj("nodes", ids, "controller", admin.describeCluster().controller().get().id());
            });
            step("createTopics", () -> {
                NewTopic nt = new NewTopic(topic, 3, (short) 1)
                        .configs(Map.of("retention.ms", "3600000", "cleanup.policy", "delete"));
                admin.createTopics(List.of(nt)).all().get();
                return obj("ok", true);
            });
            step("createTopicsAgain", () -> {
                admin.createTopics(List.of(new NewTopic(topic, 3, (short) 1))).all().get();
                return obj("ok", true);
            });
            step("listTopics", () -> obj("contains", admin.listTopics().names().get().contains(topic)));
            step("describeTopics", () -> {
                TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
                List<Object> parts = new ArrayList<>();
                for (TopicPartitionInfo tpi : d.partitions()) {
                    List<Object> replicas = new ArrayList<>();
                    for (Node r : tpi.replicas()) replicas.add(r.id());
                    List<Object> isr = new ArrayList<>();
                    for (Node r : tpi.isr()) isr.add(r.id());
                    parts.add(obj("partition", tpi.partition(), "leader", tpi.leader() == null ? null : tpi.leader().id(),
                                  "replicas", replicas, "isr", isr));
                }
                return obj("name", d.name(), "internal", d.isInternal(), "topicId", d.topicId().toString(),
                           "partitions", parts);
            });
            step("describeConfigs", () -> configsOf(admin, topic, null));
            step("incrementalAlterConfigs", () -> {
                List<AlterConfigOp> ops = List.of(
                        new AlterConfigOp(new ConfigEntry("retention.ms", "7200000"), AlterConfigOp.OpType.SET),
                        new AlterConfigOp(new ConfigEntry("max.message.bytes", "2000000"), AlterConfigOp.OpType.SET),
                        new AlterConfigOp(new ConfigEntry("cleanup.policy", null), AlterConfigOp.OpType.DELETE));
                admin.incrementalAlterConfigs(Map.of(res, ops)).all().get();
                return obj("ok", true);
            });
            step("describeConfigsAfterAlter",
                 () -> configsOf(admin, topic, Set.of("retention.ms", "max.message.bytes", "cleanup.policy")));
            step("incrementalAlterConfigsInvalid", () -> {
                List<AlterConfigOp> ops = List.of(
                        new AlterConfigOp(new ConfigEntry("retention.ms", "not-a-number"), AlterConfigOp.OpType.SET));
                admin.incrementalAlterConfigs(Map.of(res, ops)).all().get();
                return obj("ok", true);
            });
            step("produce", () -> {
                Properties pp = new Properties();
                pp.put(ProducerConfig.ACKS_CONFIG, "all");
                pp.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "false");
                try (KafkaProducer<String, String> producer = new KafkaProducer<>(producerProps(bootstrap, pp))) {
                    long last = -1;
                    // Distinct increasing timestamps so the max-timestamp offset is unambiguous.
                    long base = System.currentTimeMillis() - 1000;
                    for (int i = 0; i < 10; i++) {
                        last = producer.send(new ProducerRecord<>(topic, 0, base + i, keyOf(i), valueOf(i, 50)))
                                .get().offset();
                    }
                    return obj("lastOffset", last);
                }
            });
            step("listOffsets", () -> offsets(admin, tp0));
            step("deleteRecords", () -> {
                DeletedRecords dr = admin.deleteRecords(Map.of(tp0, RecordsToDelete.beforeOffset(4)))
                        .lowWatermarks().get(tp0).get();
                return obj("lowWatermark", dr.lowWatermark());
            });
            step("listOffsetsAfterDeleteRecords", () -> offsets(admin, tp0));
            step("deleteRecordsBeyondEnd", () -> {
                DeletedRecords dr = admin.deleteRecords(Map.of(tp0, RecordsToDelete.beforeOffset(1000)))
                        .lowWatermarks().get(tp0).get();
                return obj("lowWatermark", dr.lowWatermark());
            });
            step("deleteTopics", () -> {
                admin.deleteTopics(List.of(topic)).all().get();
                return obj("ok", true);
            });
            step("describeTopicsAfterDelete", () -> {
                // Deletion is committed by the controller; the broker's metadata follows shortly.
                long deadline = System.currentTimeMillis() + 15000;
                while (true) {
                    try {
                        admin.describeTopics(List.of(topic)).allTopicNames().get();
                    } catch (ExecutionException e) {
                        return errorOf(e);
                    }
                    if (System.currentTimeMillis() > deadline) return obj("ok", true);
                    Thread.sleep(200);
                }
            });
            step("deleteTopicsAgain", () -> {
                admin.deleteTopics(List.of(topic)).all().get();
                return obj("ok", true);
            });
        }
        return 0;
    }

    public static void main(String[] argv) {
        int code;
        try {
            Args a = new Args(argv);
            String cmd = a.pos(0, "produce|consume|admin");
            code = switch (cmd) {
                case "produce" -> produce(a);
                case "consume" -> consume(a);
                case "admin" -> admin(a);
                default -> throw new IllegalArgumentException("unknown subcommand " + cmd);
            };
        } catch (Exception e) {
            Map<String, Object> line = obj("op", "fatal");
            line.putAll(errorOf(e));
            emit(line);
            code = 2;
        }
        System.exit(code);
    }
}
