// The windowed count of bench/streams_bench.py, written with Kafka Streams: records keyed by
// key, counted per key in tumbling event-time windows (record timestamps), the windowed counts
// written with Kafka's TimeWindowedSerializer (key bytes + 8-byte big-endian window start).
// Arguments: bootstrap application.id processing.guarantee input-topic output-topic state.dir
// window-ms grace-ms. Runs until the process is terminated.
import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.kstream.WindowedSerdes;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse;

public final class WindowedCount {
    public static void main(String[] args) throws InterruptedException {
        long windowMs = Long.parseLong(args[6]);
        long graceMs = Long.parseLong(args[7]);
        Properties props = new Properties();
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, args[2]);
        props.put(StreamsConfig.STATE_DIR_CONFIG, args[5]);
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
        // The same commit interval for every framework in the bench.
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 1000);

        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(args[3], Consumed.with(Serdes.String(), Serdes.String()))
            .groupByKey()
            .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofMillis(windowMs), Duration.ofMillis(graceMs)))
            .count(Materialized.as("windowed-counts"))
            .toStream()
            .to(args[4], Produced.with(WindowedSerdes.timeWindowedSerdeFrom(String.class, windowMs),
                                       Serdes.Long()));

        run(builder, props);
    }

    static void run(StreamsBuilder builder, Properties props) throws InterruptedException {
        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        CountDownLatch done = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close();
            done.countDown();
        }));
        streams.setUncaughtExceptionHandler(e -> {
            e.printStackTrace();
            return StreamThreadExceptionResponse.SHUTDOWN_APPLICATION;
        });
        streams.start();
        System.out.println("started");
        System.out.flush();
        done.await();
    }
}
