/*
 * Transactional vs idempotent produce with the official Java client (kafka-clients), one phase
 * per JVM. Driven by bench/txn_java.py, which compiles this file against the kafka-clients jar of
 * the reference broker (.cache/kafka-ref/lib) and runs it once per broker, round and mode.
 *
 * Usage:
 *   java TxnBench <bootstrap> <topic> <records> <txn-size> <value-bytes> <idempotent|transactional>
 *        [--warmup-topic T --warmup-records N] [--wait-go] [--prop key=value ...]
 *   java TxnBench <bootstrap> <topic> <records> <txn-size> <value-bytes> interleaved
 *        --txn-topic T2 --slice N [--warmup-topic T --warmup-records N] [--wait-go] [--prop key=value ...]
 *
 * Flow: (1) optional untimed warm-up of the same mode on another topic, in chunks of
 * --warmup-records until the JIT is quiet (see warmUp: the send path is compiled before anything is
 * timed, and the compiler does not compete with the broker for the CPU); (2) a fresh producer loads the topic's metadata and, when
 * transactional, runs initTransactions() (once per producer lifetime, so not timed); (3) prints
 * {"op":"ready", "effective": {...}} (batch.size, linger.ms, acks and max.in.flight as the client
 * resolves them, defaults included) and, with --wait-go, blocks until a line arrives on stdin (the driver starts its
 * CPU clocks in between); (4) the timed phase: idempotent = send all, flush; transactional = per
 * transaction beginTransaction, send txn-size records, commitTransaction; (5) prints one
 * {"op":"result", ...} line. Progress lines ({"op":"progress"}) go to stdout every 2 s.
 *
 * Interleaved: both producers live in this one JVM (both warmed up, the transactional one
 * initialized) and the timed work alternates between them in slices of N records: idempotent
 * records go to <topic>, transactions to T2, each mode <records> in all. Pairs of slices alternate
 * their order (idempotent first, then transactional first, ...), so a machine whose speed drifts
 * during the run slows both modes alike. An idempotent slice ends with flush(); a transactional one
 * with its last commitTransaction(). Before every slice, with --wait-go, the JVM prints
 * {"op":"slice-ready", ...} and waits for a line on stdin (the driver reads its CPU clocks there);
 * after it, {"op":"slice", "mode", "index", "records", "transactions", "seconds"}. The result line
 * has one object per mode.
 *
 * Records go round-robin to the partitions by explicit partition number (record i to partition
 * i % P), as bench/groups_txn.py does, so the driver can predict the high watermarks.
 *
 * The transaction version the client used is not part of the public API: it is read by
 * reflection from KafkaProducer's private "transactionManager" field (TransactionManager has
 * public isTransactionV2Enabled() in kafka-clients 4.x), together with the producer epoch before
 * and after the timed phase. Under KIP-890 (TV2) every EndTxn bumps the epoch, so the epoch delta
 * is an independent witness of TV2 (TV1 leaves it unchanged).
 */

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.File;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Random;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class TxnBench {
    private static final long PROGRESS_NANOS = 2_000_000_000L;
    /** Warm-up stops once the JIT's CPU is under this share of a window's wall time... */
    private static final double JIT_QUIET = 0.05;
    /** ...a window being whole warm-up chunks of at least this long... */
    private static final long WARMUP_WINDOW_NANOS = 1_000_000_000L;
    /** ...or after this long, whichever comes first. */
    private static final long WARMUP_MAX_NANOS = 90_000_000_000L;
    /** Linux's USER_HZ, the unit of /proc's CPU times (100 on every Linux this runs on). */
    private static final int CLK_TCK = 100;

    /** Delivery failures of the async sends (the callback runs on the producer's I/O thread). */
    private static final class Failures implements Callback {
        final AtomicLong count = new AtomicLong();
        final AtomicReference<Exception> first = new AtomicReference<>();

        @Override
        public void onCompletion(org.apache.kafka.clients.producer.RecordMetadata md, Exception e) {
            if (e != null) {
                count.incrementAndGet();
                first.compareAndSet(null, e);
            }
        }
    }

    /** What one run of a mode did. */
    private static final class Outcome {
        long transactions;
        double seconds;
        Boolean tv2;  // null: no transaction manager, or the field could not be read
        Integer epochBefore;
        Integer epochAfter;
        long producerId = -1;
        String clientMetrics = "{}";  // see clientMetrics()
    }

    private static String bootstrap;
    // Where the run is (for the error line): Kafka's ApiExceptions carry no stack trace.
    private static volatile String stage = "start";
    private static final List<String[]> PROPS = new ArrayList<>();

    public static void main(String[] argv) throws Exception {
        if (argv.length < 6) {
            System.err.println("usage: TxnBench <bootstrap> <topic> <records> <txn-size> <value-bytes> "
                    + "<idempotent|transactional> [--warmup-topic T --warmup-records N] [--wait-go] [--prop k=v ...]");
            System.exit(2);
        }
        bootstrap = argv[0];
        String topic = argv[1];
        long records = Long.parseLong(argv[2]);
        int txnSize = Integer.parseInt(argv[3]);
        int valueBytes = Integer.parseInt(argv[4]);
        String mode = argv[5];
        if (!mode.equals("idempotent") && !mode.equals("transactional") && !mode.equals("interleaved")) {
            throw new IllegalArgumentException("mode must be idempotent, transactional or interleaved, not " + mode);
        }
        String warmupTopic = null;
        long warmupRecords = 0;
        boolean waitGo = false;
        String txnTopic = null;
        long slice = 0;
        for (int i = 6; i < argv.length; i++) {
            switch (argv[i]) {
                case "--warmup-topic": warmupTopic = argv[++i]; break;
                case "--warmup-records": warmupRecords = Long.parseLong(argv[++i]); break;
                case "--wait-go": waitGo = true; break;
                case "--txn-topic": txnTopic = argv[++i]; break;
                case "--slice": slice = Long.parseLong(argv[++i]); break;
                case "--prop": {
                    String kv = argv[++i];
                    int eq = kv.indexOf('=');
                    PROPS.add(new String[] {kv.substring(0, eq), kv.substring(eq + 1)});
                    break;
                }
                default: throw new IllegalArgumentException("unknown option " + argv[i]);
            }
        }
        boolean txn = mode.equals("transactional");
        byte[] payload = new byte[valueBytes];
        new Random(42).nextBytes(payload);
        if (mode.equals("interleaved")) {
            if (txnTopic == null || slice <= 0 || slice % txnSize != 0) {
                throw new IllegalArgumentException("interleaved needs --txn-topic and a --slice that is a positive "
                        + "multiple of txn-size (" + txnSize + "), not " + slice);
            }
            try {
                interleaved(topic, txnTopic, records, txnSize, slice, payload, warmupTopic, warmupRecords, waitGo);
            } catch (Exception e) {
                fail(e);
                throw e;
            }
            return;
        }

        if (warmupTopic != null && warmupRecords > 0) {
            String wt = warmupTopic;
            long wr = warmupRecords;
            try {
                warmUp(wr, () -> run(wt, wr, txnSize, payload, txn, false, false).transactions);
            } catch (Exception e) {
                stage = "warm-up " + stage;
                fail(e);
                throw e;
            }
        }
        Outcome o;
        try {
            o = run(topic, records, txnSize, payload, txn, waitGo, true);
        } catch (Exception e) {
            fail(e);
            throw e;
        }
        StringBuilder sb = new StringBuilder("{\"op\":\"result\",\"mode\":\"").append(mode)
                .append("\",\"records\":").append(records)
                .append(",\"transactions\":").append(o.transactions)
                .append(",\"seconds\":").append(o.seconds)
                .append(",\"tv2_enabled\":").append(o.tv2)
                .append(",\"transaction_version\":")
                .append(txn && o.tv2 != null ? (o.tv2 ? "2" : "1") : "null")
                .append(",\"producer_id\":").append(o.producerId)
                .append(",\"client_metrics\":").append(o.clientMetrics)
                .append(",\"epoch_before\":").append(o.epochBefore)
                .append(",\"epoch_after\":").append(o.epochAfter)
                .append(",\"client\":\"").append(org.apache.kafka.common.utils.AppInfoParser.getVersion())
                .append("\"}");
        emit(sb.toString());
    }

    /** One warm-up chunk: a run of the workload on the warm-up topic; returns the transactions it committed. */
    private interface WarmupChunk {
        long run() throws Exception;
    }

    /**
     * Untimed warm-up: chunks of the workload until the JIT is quiet, i.e. the compiler threads'
     * CPU over a window of at least WARMUP_WINDOW_NANOS of chunks is under JIT_QUIET of the window's
     * wall time (at most WARMUP_MAX_NANOS in all). On two cores a JVM that is still compiling gives
     * the C2 thread most of a core, which the broker then lacks: a fixed 50,000-record warm-up left
     * it compiling the I/O thread's code (Sender.sendProducerData, NetworkClient.poll, ...) through
     * the whole timed phase. A C2 task can take most of a second; CompilationMXBean counts it only
     * once it ends, so the compiler threads' own CPU is read (jitCpuSeconds) and a window spans
     * several chunks.
     * Prints {"op":"warmup", "records", "transactions", "chunks", "seconds", "jit_share"}.
     */
    private static void warmUp(long recordsPerChunk, WarmupChunk chunk) throws Exception {
        long t0 = System.nanoTime();
        long chunks = 0;
        long transactions = 0;
        double share = 1.0;
        long windowStart = t0;
        double windowJit = jitCpuSeconds();
        while (true) {
            transactions += chunk.run();
            chunks++;
            long now = System.nanoTime();
            if (now - windowStart >= WARMUP_WINDOW_NANOS) {
                double jit = jitCpuSeconds();
                share = (jit - windowJit) * 1e9 / (now - windowStart);
                if (share < JIT_QUIET) {
                    break;
                }
                windowStart = now;
                windowJit = jit;
            }
            if (now - t0 >= WARMUP_MAX_NANOS) {
                break;
            }
        }
        emit("{\"op\":\"warmup\",\"records\":" + chunks * recordsPerChunk + ",\"transactions\":" + transactions
                + ",\"chunks\":" + chunks + ",\"seconds\":" + secs(System.nanoTime() - t0)
                + ",\"uptime_s\":" + ManagementFactory.getRuntimeMXBean().getUptime() / 1000.0
                + ",\"jit_share\":" + Math.round(share * 1000) / 1000.0 + "}");
    }

    /**
     * CPU seconds of this JVM's JIT compiler threads so far (Linux: their user+system time in
     * /proc/self/task, named "C1 CompilerThre..." / "C2 CompilerThre..."); elsewhere the JIT's own
     * compile-time counter, which counts a task only once it ends.
     */
    private static double jitCpuSeconds() {
        File[] tasks = new File("/proc/self/task").listFiles();
        if (tasks == null) {
            return ManagementFactory.getCompilationMXBean().getTotalCompilationTime() / 1000.0;
        }
        long ticks = 0;
        for (File task : tasks) {
            String stat;
            try {
                stat = new String(Files.readAllBytes(new File(task, "stat").toPath()), StandardCharsets.US_ASCII);
            } catch (IOException e) {
                continue;  // the thread ended
            }
            int open = stat.indexOf('(');
            int close = stat.lastIndexOf(')');
            String name = stat.substring(open + 1, close);
            if (!name.contains("CompilerThre")) {
                continue;
            }
            // After the name: state, ppid, ... utime is the 14th field of the line, stime the 15th.
            String[] f = stat.substring(close + 2).split(" ");
            ticks += Long.parseLong(f[11]) + Long.parseLong(f[12]);
        }
        return ticks / (double) CLK_TCK;
    }

    private static Properties config(boolean txn) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("key.serializer", ByteArraySerializer.class.getName());
        p.put("value.serializer", ByteArraySerializer.class.getName());
        for (String[] kv : PROPS) {
            p.put(kv[0], kv[1]);
        }
        if (txn) {
            // A fresh id per producer: no earlier producer's state to fence or recover.
            p.put("transactional.id", "bench-java-txn-" + UUID.randomUUID().toString().substring(0, 12));
        }
        return p;
    }

    private static Outcome run(String topic, long records, int txnSize, byte[] payload, boolean txn,
                               boolean waitGo, boolean report) throws Exception {
        Outcome out = new Outcome();
        Failures failures = new Failures();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(config(txn))) {
            int partitions = producer.partitionsFor(topic).size();  // metadata loaded before the clock
            if (txn) {
                stage = "initTransactions";
                producer.initTransactions();
            }
            Object tm = transactionManager(producer);
            BufferedReader in = null;
            if (report) {
                emitReady(partitions, txn);
                if (waitGo) {
                    in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
                    if (in.readLine() == null) {
                        throw new IllegalStateException("stdin closed before the go line");
                    }
                }
            }
            stage = "timed loop";
            long t0 = System.nanoTime();
            Tick tick = new Tick(report, txn ? "committed" : "sent", t0);
            if (txn) {
                sendTransactions(producer, tm, topic, 0, records, txnSize, partitions, payload, failures, out, tick);
            } else {
                sendIdempotent(producer, topic, 0, records, partitions, payload, failures, tick);
            }
            out.seconds = secs(System.nanoTime() - t0);
            checkDelivered(failures);
            out.tv2 = tv2(tm);
            out.epochAfter = epoch(tm);
            out.producerId = producerId(tm);
            out.clientMetrics = clientMetrics(producer);
            if (in != null) {
                // The driver reads its clocks while the producer's I/O thread is still alive
                // (its CPU per thread would go with it once close() ends it).
                emit("{\"op\":\"timed-done\"}");
                if (in.readLine() == null) {
                    throw new IllegalStateException("stdin closed before the go line after the timed loop");
                }
            }
        }
        return out;
    }

    /** The ready line: the settings in force, defaults included, so the driver prints what was measured. */
    private static void emitReady(int partitions, boolean txn) {
        Map<String, ?> eff = new ProducerConfig(config(txn)).values();
        emit("{\"op\":\"ready\",\"partitions\":" + partitions
                + ",\"effective\":{\"batch.size\":\"" + eff.get("batch.size")
                + "\",\"linger.ms\":\"" + eff.get("linger.ms")
                + "\",\"acks\":\"" + eff.get("acks")
                + "\",\"max.in.flight.requests.per.connection\":\""
                + eff.get("max.in.flight.requests.per.connection") + "\"}}");
    }

    /**
     * Progress callback of the send loops (records done so far): prints a progress line every
     * PROGRESS_NANOS when it reports. Every loop, warm-up and interleaved slices included, gets one
     * of this one class, so the code the JIT compiled in the warm-up is the code that is timed (a
     * null or another class met first in the timed loop would deoptimize it and make C2 compile
     * the whole inlined send path again, inside the timed phase).
     */
    private static final class Tick {
        private final boolean report;
        private final String what;
        private final long t0;
        private long next;

        Tick(boolean report, String what, long t0) {
            this.report = report;
            this.what = what;
            this.t0 = t0;
            this.next = t0 + PROGRESS_NANOS;
        }

        void at(long done) {
            if (!report) {
                return;
            }
            long now = System.nanoTime();
            if (now >= next) {
                next = now + PROGRESS_NANOS;
                progress(done, what, now - t0);
            }
        }
    }

    /** Records [from, from + count) of the idempotent workload (record i to partition i % P), then flush(). */
    private static void sendIdempotent(KafkaProducer<byte[], byte[]> producer, String topic, long from, long count,
                                       int partitions, byte[] payload, Failures failures, Tick tick) {
        for (long i = from; i < from + count; i++) {
            producer.send(new ProducerRecord<>(topic, (int) (i % partitions), null, payload), failures);
            if ((i & 0x3FFF) == 0) {
                tick.at(i - from);
            }
        }
        stage = "flush";
        producer.flush();
    }

    /** Records [from, from + count) as transactions of txnSize (begin, sends, commit each); counts them in out. */
    private static void sendTransactions(KafkaProducer<byte[], byte[]> producer, Object tm, String topic, long from,
                                         long count, int txnSize, int partitions, byte[] payload, Failures failures,
                                         Outcome out, Tick tick) {
        long done = from;
        while (done < from + count) {
            long n = Math.min(txnSize, from + count - done);
            stage = "beginTransaction (transaction " + (out.transactions + 1) + ")";
            producer.beginTransaction();
            if (out.epochBefore == null) {
                // After initTransactions and the first begin: the epoch the first txn uses.
                out.epochBefore = epoch(tm);
            }
            stage = "send (transaction " + (out.transactions + 1) + ")";
            for (long i = done; i < done + n; i++) {
                producer.send(new ProducerRecord<>(topic, (int) (i % partitions), null, payload), failures);
            }
            stage = "commitTransaction (transaction " + (out.transactions + 1) + ")";
            producer.commitTransaction();
            done += n;
            out.transactions++;
            tick.at(done - from);
        }
    }

    private static void checkDelivered(Failures failures) {
        if (failures.count.get() > 0) {
            throw new IllegalStateException(failures.count.get() + " delivery failures, first: "
                    + failures.first.get(), failures.first.get());
        }
    }

    /**
     * Both modes in one JVM, alternating in slices (see the header). The warm-up runs each mode
     * once on the warm-up topic with its own producer; the timed producers are fresh.
     */
    private static void interleaved(String idemTopic, String txnTopic, long records, int txnSize, long slice,
                                    byte[] payload, String warmupTopic, long warmupRecords, boolean waitGo)
            throws Exception {
        if (warmupTopic != null && warmupRecords > 0) {
            warmUp(2 * warmupRecords, () -> run(warmupTopic, warmupRecords, txnSize, payload, false, false, false)
                    .transactions + run(warmupTopic, warmupRecords, txnSize, payload, true, false, false).transactions);
        }
        Failures failures = new Failures();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        try (KafkaProducer<byte[], byte[]> idem = new KafkaProducer<>(config(false));
             KafkaProducer<byte[], byte[]> txn = new KafkaProducer<>(config(true))) {
            int partitions = idem.partitionsFor(idemTopic).size();
            if (txn.partitionsFor(txnTopic).size() != partitions) {
                throw new IllegalStateException(idemTopic + " and " + txnTopic + " differ in partition count");
            }
            stage = "initTransactions";
            txn.initTransactions();
            Object tm = transactionManager(txn);
            emitReady(partitions, true);  // both producers have the same settings but transactional.id
            Outcome txnOut = new Outcome();
            long[] done = {0, 0};  // records done: idempotent, transactional
            double[] seconds = {0, 0};
            long slices = (records + slice - 1) / slice;
            Tick quiet = new Tick(false, "", System.nanoTime());  // the slices print no progress
            for (long k = 0; k < slices; k++) {
                // Pairs alternate their order: a drift in the machine's speed meets both modes alike.
                int[] order = k % 2 == 0 ? new int[] {0, 1} : new int[] {1, 0};
                for (int m : order) {
                    String name = m == 0 ? "idempotent" : "transactional";
                    long n = Math.min(slice, records - done[m]);
                    if (waitGo) {
                        emit("{\"op\":\"slice-ready\",\"mode\":\"" + name + "\",\"index\":" + k + "}");
                        if (in.readLine() == null) {
                            throw new IllegalStateException("stdin closed before the go line of slice " + k);
                        }
                    }
                    long txns0 = txnOut.transactions;
                    stage = name + " slice " + k;
                    long t0 = System.nanoTime();
                    if (m == 0) {
                        sendIdempotent(idem, idemTopic, done[m], n, partitions, payload, failures, quiet);
                    } else {
                        sendTransactions(txn, tm, txnTopic, done[m], n, txnSize, partitions, payload, failures, txnOut,
                                quiet);
                    }
                    long nanos = System.nanoTime() - t0;
                    checkDelivered(failures);
                    done[m] += n;
                    seconds[m] += nanos / 1e9;
                    emit("{\"op\":\"slice\",\"mode\":\"" + name + "\",\"index\":" + k + ",\"records\":" + n
                            + ",\"transactions\":" + (txnOut.transactions - txns0) + ",\"seconds\":" + nanos / 1e9 + "}");
                }
            }
            txnOut.tv2 = tv2(tm);
            txnOut.epochAfter = epoch(tm);
            txnOut.producerId = producerId(tm);
            emit("{\"op\":\"result\",\"mode\":\"interleaved\",\"slices\":" + slices
                    + ",\"idempotent\":{\"records\":" + done[0] + ",\"transactions\":0,\"seconds\":" + seconds[0]
                    + ",\"client_metrics\":" + clientMetrics(idem)
                    + "},\"transactional\":{\"records\":" + done[1] + ",\"transactions\":" + txnOut.transactions
                    + ",\"seconds\":" + seconds[1]
                    + ",\"tv2_enabled\":" + txnOut.tv2
                    + ",\"transaction_version\":" + (txnOut.tv2 == null ? "null" : txnOut.tv2 ? "2" : "1")
                    + ",\"producer_id\":" + txnOut.producerId
                    + ",\"epoch_before\":" + txnOut.epochBefore
                    + ",\"epoch_after\":" + txnOut.epochAfter
                    + ",\"client_metrics\":" + clientMetrics(txn)
                    + "},\"client\":\"" + org.apache.kafka.common.utils.AppInfoParser.getVersion() + "\"}");
        }
    }

    /**
     * The producer's own counters over its life (a fresh producer per timed phase, so the phase plus
     * metadata and initTransactions): how long send() waited for buffer memory (the back-pressure of
     * a producer that outruns the broker), the requests it sent and its average batch size.
     */
    private static String clientMetrics(KafkaProducer<?, ?> producer) {
        String[][] wanted = {{"buffer_wait_s", "bufferpool-wait-time-ns-total", "1e-9"},
                             {"requests", "request-total", "1"},
                             {"batch_size_avg", "batch-size-avg", "1"}};
        StringBuilder sb = new StringBuilder("{");
        for (String[] w : wanted) {
            double value = Double.NaN;
            for (Map.Entry<MetricName, ? extends Metric> e : producer.metrics().entrySet()) {
                if (e.getKey().group().equals("producer-metrics") && e.getKey().name().equals(w[1])
                        && e.getValue().metricValue() instanceof Number n) {
                    value = n.doubleValue() * Double.parseDouble(w[2]);
                }
            }
            sb.append(sb.length() > 1 ? "," : "").append('"').append(w[0]).append("\":")
                    .append(Double.isNaN(value) ? "null" : Double.toString(value));
        }
        return sb.append('}').toString();
    }

    // -- reflection into the client's internals (read-only) -------------------------------------

    private static Object transactionManager(KafkaProducer<?, ?> producer) {
        try {
            Field f = KafkaProducer.class.getDeclaredField("transactionManager");
            f.setAccessible(true);
            return f.get(producer);
        } catch (ReflectiveOperationException | RuntimeException e) {
            System.err.println("TxnBench: cannot read KafkaProducer.transactionManager: " + e);
            return null;
        }
    }

    private static Boolean tv2(Object tm) {
        if (tm == null) {
            return null;
        }
        try {
            Method m = tm.getClass().getMethod("isTransactionV2Enabled");
            return (Boolean) m.invoke(tm);
        } catch (ReflectiveOperationException | RuntimeException e) {
            System.err.println("TxnBench: cannot call TransactionManager.isTransactionV2Enabled(): " + e);
            return null;
        }
    }

    private static Object producerIdAndEpoch(Object tm) throws ReflectiveOperationException {
        Field f = tm.getClass().getDeclaredField("producerIdAndEpoch");
        f.setAccessible(true);
        return f.get(tm);
    }

    private static Integer epoch(Object tm) {
        if (tm == null) {
            return null;
        }
        try {
            Object pe = producerIdAndEpoch(tm);
            return ((Number) pe.getClass().getField("epoch").get(pe)).intValue();
        } catch (ReflectiveOperationException | RuntimeException e) {
            System.err.println("TxnBench: cannot read the producer epoch: " + e);
            return null;
        }
    }

    private static long producerId(Object tm) {
        if (tm == null) {
            return -1;
        }
        try {
            Object pe = producerIdAndEpoch(tm);
            return ((Number) pe.getClass().getField("producerId").get(pe)).longValue();
        } catch (ReflectiveOperationException | RuntimeException e) {
            return -1;
        }
    }

    /** One error line: the stage, the exception chain and the delivery failures' first cause. */
    private static void fail(Exception e) {
        StringBuilder chain = new StringBuilder();
        for (Throwable t = e; t != null; t = t.getCause() == t ? null : t.getCause()) {
            if (chain.length() > 0) {
                chain.append(" <- caused by ");
            }
            chain.append(t.getClass().getName()).append(": ").append(t.getMessage());
        }
        emit("{\"op\":\"error\",\"stage\":\"" + json(stage) + "\",\"exception\":\"" + json(chain.toString()) + "\"}");
    }

    private static String json(String s) {
        return s.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n");
    }

    // -- output -------------------------------------------------------------------------------

    private static double secs(long nanos) {
        return Math.round(nanos / 1e5) / 1e4;
    }

    private static void progress(long done, String what, long nanos) {
        emit("{\"op\":\"progress\",\"done\":" + done + ",\"what\":\"" + what + "\",\"seconds\":" + secs(nanos) + "}");
    }

    private static synchronized void emit(String line) {
        System.out.println(line);
        System.out.flush();
    }
}
