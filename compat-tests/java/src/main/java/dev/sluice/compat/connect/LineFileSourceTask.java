package dev.sluice.compat.connect;

import java.io.ByteArrayOutputStream;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.errors.ConnectException;
import org.apache.kafka.connect.source.SourceRecord;
import org.apache.kafka.connect.source.SourceTask;

/**
 * The task of {@link LineFileSourceConnector}: from the committed position
 * (or the start of the file), each poll returns the complete lines written
 * since, each record carrying the position just after its line; a line
 * still without its newline waits for the next poll.
 */
public final class LineFileSourceTask extends SourceTask {
    static final String POSITION = "position";
    // A poll stops reading at the end of the chunk in which it reached this
    // many lines; the bytes after the last newline stay in pending.
    private static final int MAX_BATCH = 500;

    private String file;
    private String topic;
    private Map<String, String> partition;
    private long position;
    private final byte[] buf = new byte[64 << 10];
    private final ByteArrayOutputStream pending = new ByteArrayOutputStream();

    @Override
    public String version() {
        return "1";
    }

    @Override
    public void start(Map<String, String> props) {
        file = props.get(LineFileSourceConnector.FILE);
        topic = props.get(LineFileSourceConnector.TOPIC);
        partition = Map.of("filename", file);
        Map<String, Object> committed = context.offsetStorageReader().offset(partition);
        if (committed != null) {
            Object p = committed.get(POSITION);
            if (!(p instanceof Number)) {
                throw new ConnectException("committed offset of " + file + " has no numeric position: " + committed);
            }
            position = ((Number) p).longValue();
        }
    }

    @Override
    public List<SourceRecord> poll() throws InterruptedException {
        List<SourceRecord> out = new ArrayList<>();
        try (RandomAccessFile f = new RandomAccessFile(file, "r")) {
            f.seek(position + pending.size());
            int n;
            while (out.size() < MAX_BATCH && (n = f.read(buf)) > 0) {
                for (int i = 0; i < n; i++) {
                    if (buf[i] != '\n') {
                        pending.write(buf[i]);
                        continue;
                    }
                    position += pending.size() + 1;
                    String line = pending.toString(StandardCharsets.UTF_8);
                    pending.reset();
                    out.add(new SourceRecord(partition, Map.of(POSITION, position), topic, null,
                            null, null, Schema.STRING_SCHEMA, line));
                }
            }
        } catch (FileNotFoundException e) {
            // Not there yet: nothing to read.
        } catch (IOException e) {
            throw new ConnectException("reading " + file, e);
        }
        if (out.isEmpty()) {
            Thread.sleep(100);
            return null;
        }
        return out;
    }

    @Override
    public void stop() {
    }
}
