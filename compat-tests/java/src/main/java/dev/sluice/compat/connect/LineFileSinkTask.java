package dev.sluice.compat.connect;

import java.io.BufferedWriter;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.util.Collection;
import java.util.Map;

import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.connect.errors.ConnectException;
import org.apache.kafka.connect.sink.SinkRecord;
import org.apache.kafka.connect.sink.SinkTask;

/** The task of {@link LineFileSinkConnector}. */
public final class LineFileSinkTask extends SinkTask {
    private String file;
    private BufferedWriter out;

    @Override
    public String version() {
        return "1";
    }

    @Override
    public void start(Map<String, String> props) {
        file = props.get(LineFileSinkConnector.FILE);
        try {
            out = Files.newBufferedWriter(Paths.get(file), StandardCharsets.UTF_8,
                    StandardOpenOption.CREATE, StandardOpenOption.APPEND, StandardOpenOption.WRITE);
        } catch (IOException e) {
            throw new ConnectException("opening " + file, e);
        }
    }

    @Override
    public void put(Collection<SinkRecord> records) {
        try {
            for (SinkRecord r : records) {
                out.write(String.valueOf(r.value()));
                out.write('\n');
            }
        } catch (IOException e) {
            throw new ConnectException("writing " + file, e);
        }
    }

    @Override
    public void flush(Map<TopicPartition, OffsetAndMetadata> offsets) {
        try {
            out.flush();
        } catch (IOException e) {
            throw new ConnectException("flushing " + file, e);
        }
    }

    @Override
    public void stop() {
        try {
            if (out != null) {
                out.close();
            }
        } catch (IOException e) {
            throw new ConnectException("closing " + file, e);
        }
    }
}
