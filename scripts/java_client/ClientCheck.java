/*
 * ClientCheck: drives the official Java Kafka client (kafka-clients) against a broker and
 * prints what it observes as JSON lines, one object per line with an "op" field, so pytest
 * can compare strom with Apache Kafka. Compiled at test time against the kafka-clients jar
 * of the reference broker (scripts/java_client/java_client.py).
 *
 *   produce <bootstrap> <topic> <n> [--prop k=v]... [--partition p] [--value-bytes b]
 *   consume <bootstrap> <topic> <n> [--prop k=v]... [--timeout-ms t]
 *   admin   <bootstrap> <topic> [--prop k=v]...
 *   txn     <bootstrap> <topic> <transactions> <records-per-txn> [--abort-every k] [--txn-id id]
 *           [--value-bytes b] [--first-txn f] [--leave-open r] [--prop k=v]...
 *   rpw     <bootstrap> <input> <output> <group> <transactions> [--batch b] [--abort-every k]
 *           [--txn-id id] [--idle-ms t] [--partition-fetch-bytes n] [--prop k=v]...
 *   zombie  <bootstrap> <topic> [--txn-id id] [--prop k=v]...
 *   timeout <bootstrap> <topic> [--txn-id id] [--timeout-ms t] [--wait-ms w] [--prop k=v]...
 *
 * txn, rpw and zombie drive the transactional producer: txn runs transactions of fixed size,
 * aborting every k-th (1-based: with k=3 transactions 3, 6, 9, ... abort), then with
 * --leave-open writes r more records in a transaction it never ends (the JVM halts); rpw is a
 * read-process-write loop (read_committed consumer in group <group>, sendOffsetsToTransaction,
 * rewind to the batch start after an abort); zombie fences one producer with a second one of
 * the same transactional.id and reports what the first one's calls then throw; timeout lets
 * the coordinator abort two transactions for exceeding transaction.timeout.ms, then commits
 * one and aborts the other, reporting each outcome. Each reports
 * the transaction version the client used, read by reflection from the producer's
 * TransactionManager (isTransactionV2Enabled(), producerIdAndEpoch()).
 *
 * --prop sets a client property (acks, compression.type, enable.idempotence, ...). Record i
 * has key "key-<i>", a header seq=<i> and a value "value-<i>-" padded with a repeating
 * pattern to --value-bytes, so compression has something to squeeze and the consumer side
 * can recompute the expected record. Exit code 0 = the program ran (client errors are
 * reported as JSON), 2 = usage error or an unexpected exception ("op":"fatal").
 */

import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
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
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
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
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.errors.OutOfOrderSequenceException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.common.utils.ProducerIdAndEpoch;

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

    // ---- transactions ----------------------------------------------------------------------

    /** Like errorOf, plus the class of the exception's cause (the client wraps fencing errors). */
    static Map<String, Object> errorChain(Throwable t) {
        Map<String, Object> out = errorOf(t);
        Throwable cause = (t instanceof ExecutionException && t.getCause() != null) ? t.getCause() : t;
        Throwable inner = cause.getCause();
        out.put("cause", inner == null ? null : inner.getClass().getSimpleName());
        return out;
    }

    /**
     * The transaction version and producer id/epoch the client is using, read by reflection:
     * KafkaProducer.transactionManager (private), TransactionManager.isTransactionV2Enabled()
     * (public) and producerIdAndEpoch() (package-private) in kafka-clients 4.3.1. A failure is
     * reported as "reflectionError" rather than guessed.
     */
    static Map<String, Object> txnState(KafkaProducer<?, ?> producer) {
        Map<String, Object> out = new LinkedHashMap<>();
        try {
            Field f = KafkaProducer.class.getDeclaredField("transactionManager");
            f.setAccessible(true);
            Object tm = f.get(producer);
            if (tm == null) return obj("reflectionError", "producer has no TransactionManager");
            Method v2 = tm.getClass().getDeclaredMethod("isTransactionV2Enabled");
            v2.setAccessible(true);
            out.put("tv2", v2.invoke(tm));
            Method pe = tm.getClass().getDeclaredMethod("producerIdAndEpoch");
            pe.setAccessible(true);
            ProducerIdAndEpoch ide = (ProducerIdAndEpoch) pe.invoke(tm);
            out.put("producerId", ide.producerId);
            out.put("epoch", (int) ide.epoch);
        } catch (ReflectiveOperationException | RuntimeException e) {
            out.put("reflectionError", e.toString());
        }
        return out;
    }

    static Properties txnProducerProps(String bootstrap, String txnId, Properties extra) {
        Properties p = new Properties();
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "60000");
        p.putAll(extra);
        return producerProps(bootstrap, p);
    }

    static boolean abortsAt(int txn, int abortEvery) {
        return abortEvery > 0 && (txn + 1) % abortEvery == 0;
    }

    /** Errors after which the producer cannot go on (KafkaProducer javadoc's fatal list). */
    static boolean fatal(Throwable t) {
        return t instanceof ProducerFencedException || t instanceof OutOfOrderSequenceException
                || t instanceof AuthorizationException;
    }

    /** Abort after a failure unless the error is fatal; report what the abort did. */
    static Map<String, Object> abortAfterError(KafkaProducer<?, ?> producer, Throwable t) {
        if (fatal(t)) return obj("recovery", "none (fatal)");
        try {
            producer.abortTransaction();
            return obj("recovery", "aborted");
        } catch (Exception e) {
            Map<String, Object> out = obj("recovery", "abortFailed");
            out.put("abortError", errorChain(e));
            return out;
        }
    }

    static int txn(Args a) throws Exception {
        String bootstrap = a.pos(1, "bootstrap");
        String topic = a.pos(2, "topic");
        int transactions = Integer.parseInt(a.pos(3, "transactions"));
        int perTxn = Integer.parseInt(a.pos(4, "records-per-txn"));
        int abortEvery = a.opt("abort-every", 0);
        int valueBytes = a.opt("value-bytes", 100);
        // Numbering starts here, so a second run on the same topic has its own seq values.
        int firstTxn = a.opt("first-txn", 0);
        String txnId = a.options.getOrDefault("txn-id", "clientcheck-" + topic);
        int committed = 0;
        int aborted = 0;
        int failed = 0;
        try (KafkaProducer<String, String> producer =
                     new KafkaProducer<>(txnProducerProps(bootstrap, txnId, a.props))) {
            producer.initTransactions();
            Map<String, Object> init = obj("op", "init", "transactionalId", txnId);
            init.putAll(txnState(producer));
            emit(init);
            for (int t = firstTxn; t < firstTxn + transactions; t++) {
                boolean abort = abortsAt(t, abortEvery);
                Map<String, Object> line = obj("op", "txn", "txn", t, "outcome", abort ? "abort" : "commit");
                Object[] results = new Object[perTxn];
                CountDownLatch acked = new CountDownLatch(perTxn);
                int issued = 0;
                try {
                    producer.beginTransaction();
                    for (int r = 0; r < perTxn; r++) {
                        final int idx = r;
                        int j = t * perTxn + r;
                        ProducerRecord<String, String> rec =
                                new ProducerRecord<>(topic, keyOf(j), valueOf(j, valueBytes));
                        rec.headers().add("seq", Integer.toString(j).getBytes(StandardCharsets.UTF_8));
                        rec.headers().add("txn", Integer.toString(t).getBytes(StandardCharsets.UTF_8));
                        producer.send(rec, (RecordMetadata md, Exception e) -> {
                            synchronized (results) {
                                results[idx] = e != null ? e : md;
                            }
                            acked.countDown();
                        });
                        issued++;
                    }
                    if (abort) {
                        // Write the records before aborting, so the abort marker has data to
                        // hide and read_committed filtering is really exercised.
                        producer.flush();
                        producer.abortTransaction();
                        aborted++;
                    } else {
                        producer.commitTransaction();
                        committed++;
                    }
                    line.put("ok", true);
                } catch (Exception e) {
                    failed++;
                    line.put("ok", false);
                    line.putAll(errorChain(e));
                    line.putAll(abortAfterError(producer, e));
                }
                // Records never handed to send() get no callback: don't wait for them.
                for (int k = issued; k < perTxn; k++) acked.countDown();
                acked.await(30, TimeUnit.SECONDS);
                List<Object> sent = new ArrayList<>();
                int sendErrors = 0;
                Object firstSendError = null;
                synchronized (results) {
                    for (Object r : results) {
                        if (r instanceof RecordMetadata md) {
                            sent.add(List.of(md.partition(), md.offset()));
                        } else {
                            sent.add(null);
                            sendErrors++;
                            if (firstSendError == null) {
                                firstSendError = r == null ? "no callback" : errorChain((Throwable) r);
                            }
                        }
                    }
                }
                line.put("sendErrors", sendErrors);
                if (firstSendError != null) line.put("firstSendError", firstSendError);
                line.put("sent", sent);
                Map<String, Object> st = txnState(producer);
                line.put("epoch", st.get("epoch"));
                emit(line);
                if (line.get("recovery") != null && !"aborted".equals(line.get("recovery"))) break;
            }
            Map<String, Object> summary = obj("op", "txnSummary", "transactions", transactions,
                    "committed", committed, "aborted", aborted, "failed", failed,
                    "initEpoch", init.get("epoch"), "initTv2", init.get("tv2"));
            summary.putAll(txnState(producer));
            emit(summary);
            int leaveOpen = a.opt("leave-open", 0);
            if (leaveOpen > 0) {
                // A crashed application: one more transaction is written but never ended.
                producer.beginTransaction();
                List<Object> sent = new ArrayList<>();
                for (int r = 0; r < leaveOpen; r++) {
                    int j = (firstTxn + transactions) * perTxn + r;
                    ProducerRecord<String, String> rec =
                            new ProducerRecord<>(topic, keyOf(j), valueOf(j, valueBytes));
                    rec.headers().add("seq", Integer.toString(j).getBytes(StandardCharsets.UTF_8));
                    rec.headers().add("txn", Integer.toString(firstTxn + transactions).getBytes(StandardCharsets.UTF_8));
                    RecordMetadata md = producer.send(rec).get();
                    sent.add(List.of(md.partition(), md.offset()));
                }
                emit(obj("op", "leftOpen", "txn", firstTxn + transactions, "records", leaveOpen, "sent", sent));
                // halt, not exit: no close(), so the producer cannot abort on the way out.
                Runtime.getRuntime().halt(0);
            }
        }
        return 0;
    }

    /** Read-process-write: input (group, read_committed) -> output, offsets in the transaction. */
    static int rpw(Args a) throws Exception {
        String bootstrap = a.pos(1, "bootstrap");
        String input = a.pos(2, "input");
        String output = a.pos(3, "output");
        String group = a.pos(4, "group");
        int transactions = Integer.parseInt(a.pos(5, "transactions"));
        int batch = a.opt("batch", 20);
        int abortEvery = a.opt("abort-every", 0);
        long idleMs = a.opt("idle-ms", 15000);
        String txnId = a.options.getOrDefault("txn-id", "clientcheck-rpw-" + group);
        Properties cp = new Properties();
        cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        cp.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        cp.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        cp.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, Integer.toString(batch));
        cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        cp.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        cp.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
        if (a.options.containsKey("partition-fetch-bytes")) {
            // Small fetches per partition make one poll batch span several partitions.
            cp.put(ConsumerConfig.MAX_PARTITION_FETCH_BYTES_CONFIG, a.options.get("partition-fetch-bytes"));
        }
        int committed = 0;
        int aborted = 0;
        int failed = 0;
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(cp);
             KafkaProducer<String, String> producer =
                     new KafkaProducer<>(txnProducerProps(bootstrap, txnId, a.props))) {
            producer.initTransactions();
            Map<String, Object> init = obj("op", "init", "transactionalId", txnId);
            init.putAll(txnState(producer));
            emit(init);
            consumer.subscribe(List.of(input));
            Set<TopicPartition> seen = new java.util.HashSet<>();
            for (int t = 0; t < transactions; t++) {
                List<ConsumerRecord<String, String>> records = new ArrayList<>();
                long deadline = System.currentTimeMillis() + idleMs;
                while (records.size() < batch && System.currentTimeMillis() < deadline) {
                    ConsumerRecords<String, String> polled = consumer.poll(Duration.ofMillis(200));
                    for (ConsumerRecord<String, String> r : polled) records.add(r);
                }
                if (records.isEmpty()) {
                    emit(obj("op", "txn", "txn", t, "outcome", "empty"));
                    break;
                }
                boolean abort = abortsAt(t, abortEvery);
                // First and last input offset of this batch per partition: the rewind target
                // after an abort and what the test checks the committed offsets against.
                Map<TopicPartition, long[]> range = new HashMap<>();
                for (ConsumerRecord<String, String> r : records) {
                    TopicPartition tp = new TopicPartition(r.topic(), r.partition());
                    long[] fl = range.computeIfAbsent(tp, k -> new long[] {r.offset(), r.offset()});
                    fl[0] = Math.min(fl[0], r.offset());
                    fl[1] = Math.max(fl[1], r.offset());
                }
                seen.addAll(range.keySet());
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                Map<String, Object> inputRange = new TreeMap<>();
                Map<String, Object> positions = new TreeMap<>();
                for (Map.Entry<TopicPartition, long[]> e : range.entrySet()) {
                    long pos = consumer.position(e.getKey());
                    offsets.put(e.getKey(), new OffsetAndMetadata(pos));
                    inputRange.put(Integer.toString(e.getKey().partition()), List.of(e.getValue()[0], e.getValue()[1]));
                    positions.put(Integer.toString(e.getKey().partition()), pos);
                }
                Map<String, Object> line = obj("op", "txn", "txn", t, "outcome", abort ? "abort" : "commit",
                        "records", records.size(), "input", inputRange, "offsets", positions,
                        "generation", consumer.groupMetadata().generationId());
                try {
                    producer.beginTransaction();
                    for (ConsumerRecord<String, String> r : records) {
                        ProducerRecord<String, String> out = new ProducerRecord<>(output, r.key(), r.value());
                        out.headers().add("src", (r.partition() + ":" + r.offset()).getBytes(StandardCharsets.UTF_8));
                        out.headers().add("txn", Integer.toString(t).getBytes(StandardCharsets.UTF_8));
                        producer.send(out);
                    }
                    producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                    if (abort) {
                        producer.flush();
                        producer.abortTransaction();
                        aborted++;
                    } else {
                        producer.commitTransaction();
                        committed++;
                    }
                    line.put("ok", true);
                } catch (Exception e) {
                    failed++;
                    line.put("ok", false);
                    line.putAll(errorChain(e));
                    line.putAll(abortAfterError(producer, e));
                    abort = true;
                }
                if (abort) {
                    // The output of this batch is gone: process the same input again.
                    for (Map.Entry<TopicPartition, long[]> e : range.entrySet()) {
                        consumer.seek(e.getKey(), e.getValue()[0]);
                    }
                }
                line.put("epoch", txnState(producer).get("epoch"));
                emit(line);
                if (line.get("recovery") != null && !"aborted".equals(line.get("recovery"))) break;
            }
            Map<String, Object> groupOffsets = new TreeMap<>();
            Set<TopicPartition> asked = new java.util.HashSet<>(seen);
            asked.addAll(consumer.assignment());
            for (Map.Entry<TopicPartition, OffsetAndMetadata> e : consumer.committed(asked).entrySet()) {
                groupOffsets.put(Integer.toString(e.getKey().partition()),
                                 e.getValue() == null ? null : e.getValue().offset());
            }
            Map<String, Object> summary = obj("op", "rpwSummary", "transactions", transactions,
                    "committed", committed, "aborted", aborted, "failed", failed,
                    "groupOffsets", groupOffsets, "initEpoch", init.get("epoch"), "initTv2", init.get("tv2"),
                    "memberId", consumer.groupMetadata().memberId());
            summary.putAll(txnState(producer));
            emit(summary);
        }
        return 0;
    }

    interface TxnStep {
        Map<String, Object> run() throws Exception;
    }

    /** Like step(), but errors carry their cause class (fencing arrives wrapped). */
    static Map<String, Object> txnStep(String name, TxnStep s) {
        Map<String, Object> line = obj("op", name);
        try {
            line.put("ok", true);
            line.putAll(s.run());
        } catch (Exception e) {
            line.put("ok", false);
            line.putAll(errorChain(e));
        }
        emit(line);
        return line;
    }

    /** Two producers, one transactional.id: the second's initTransactions fences the first. */
    static int zombie(Args a) throws Exception {
        String bootstrap = a.pos(1, "bootstrap");
        String topic = a.pos(2, "topic");
        String txnId = a.options.getOrDefault("txn-id", "clientcheck-zombie-" + topic);
        KafkaProducer<String, String> first = new KafkaProducer<>(txnProducerProps(bootstrap, txnId, a.props));
        KafkaProducer<String, String> second = null;
        try {
            txnStep("firstInit", () -> {
                first.initTransactions();
                return txnState(first);
            });
            txnStep("firstSend", () -> {
                first.beginTransaction();
                RecordMetadata md = first.send(new ProducerRecord<>(topic, 0, "zombie", "zombie-0")).get();
                return obj("partition", md.partition(), "offset", md.offset());
            });
            KafkaProducer<String, String> fencer = new KafkaProducer<>(txnProducerProps(bootstrap, txnId, a.props));
            second = fencer;
            txnStep("secondInit", () -> {
                fencer.initTransactions();
                return txnState(fencer);
            });
            txnStep("zombieSend", () -> {
                RecordMetadata md = first.send(new ProducerRecord<>(topic, 0, "zombie", "zombie-1")).get();
                return obj("partition", md.partition(), "offset", md.offset());
            });
            txnStep("zombieCommit", () -> {
                first.commitTransaction();
                return obj();
            });
            txnStep("zombieAbort", () -> {
                first.abortTransaction();
                return obj();
            });
            txnStep("secondCommit", () -> {
                fencer.beginTransaction();
                RecordMetadata md = fencer.send(new ProducerRecord<>(topic, 0, "fencer", "fencer-0")).get();
                fencer.commitTransaction();
                Map<String, Object> out = obj("partition", md.partition(), "offset", md.offset());
                out.putAll(txnState(fencer));
                return out;
            });
        } finally {
            first.close(Duration.ofSeconds(5));
            if (second != null) second.close(Duration.ofSeconds(5));
        }
        return 0;
    }

    /**
     * Two producers whose transactions the coordinator aborts for exceeding
     * transaction.timeout.ms; then one commits and the other aborts. The wait is on the
     * read_committed end offset (the LSO): it passes the records once both are aborted.
     */
    static int timeout(Args a) throws Exception {
        String bootstrap = a.pos(1, "bootstrap");
        String topic = a.pos(2, "topic");
        String txnId = a.options.getOrDefault("txn-id", "clientcheck-timeout-" + topic);
        long waitMs = a.opt("wait-ms", 40000);
        Properties extra = new Properties();
        extra.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, Integer.toString(a.opt("timeout-ms", 2000)));
        extra.putAll(a.props);
        TopicPartition tp = new TopicPartition(topic, 0);
        Properties cp = new Properties();
        cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        cp.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        cp.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
        try (KafkaProducer<String, String> aborter =
                     new KafkaProducer<>(txnProducerProps(bootstrap, txnId + "-a", extra));
             KafkaProducer<String, String> committer =
                     new KafkaProducer<>(txnProducerProps(bootstrap, txnId + "-c", extra));
             KafkaConsumer<String, String> consumer = new KafkaConsumer<>(cp)) {
            consumer.assign(List.of(tp));  // endOffsets of an assigned partition: no LSO warnings
            long[] last = {-1};
            txnStep("init", () -> {
                aborter.initTransactions();
                committer.initTransactions();
                Map<String, Object> out = obj("aborter", txnState(aborter), "committer", txnState(committer));
                return out;
            });
            txnStep("send", () -> {
                aborter.beginTransaction();
                committer.beginTransaction();
                long oa = aborter.send(new ProducerRecord<>(topic, 0, "aborter", "a-0")).get().offset();
                long oc = committer.send(new ProducerRecord<>(topic, 0, "committer", "c-0")).get().offset();
                last[0] = Math.max(oa, oc);
                return obj("offsets", List.of(oa, oc));
            });
            long start = System.currentTimeMillis();
            long lso = -1;
            while (System.currentTimeMillis() - start < waitMs) {
                lso = consumer.endOffsets(List.of(tp)).get(tp);
                if (lso > last[0]) break;
                Thread.sleep(200);
            }
            emit(obj("op", "timedOut", "ok", lso > last[0], "lso", lso, "waitedMs", System.currentTimeMillis() - start));
            txnStep("commitAfterTimeout", () -> {
                committer.commitTransaction();
                return txnState(committer);
            });
            txnStep("abortAfterCommitFailed", () -> {
                committer.abortTransaction();
                return txnState(committer);
            });
            txnStep("abortAfterTimeout", () -> {
                aborter.abortTransaction();
                return txnState(aborter);
            });
            txnStep("nextTxn", () -> {
                aborter.beginTransaction();
                long o = aborter.send(new ProducerRecord<>(topic, 0, "aborter", "a-1")).get().offset();
                aborter.commitTransaction();
                Map<String, Object> out = obj("offset", o);
                out.putAll(txnState(aborter));
                return out;
            });
        }
        return 0;
    }

    public static void main(String[] argv) {
        int code;
        try {
            Args a = new Args(argv);
            String cmd = a.pos(0, "produce|consume|admin|txn|rpw|zombie|timeout");
            code = switch (cmd) {
                case "produce" -> produce(a);
                case "consume" -> consume(a);
                case "admin" -> admin(a);
                case "txn" -> txn(a);
                case "rpw" -> rpw(a);
                case "zombie" -> zombie(a);
                case "timeout" -> timeout(a);
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
