package dev.sluice.compat;

import java.io.File;
import java.util.Enumeration;
import java.util.jar.JarEntry;
import java.util.jar.JarFile;

/**
 * Loads, without initialising them, the classes of the class path's jars
 * whose file names start with one of the arguments. The compat suite runs
 * it once per run with -XX:ArchiveClassesAtExit, so that the archive holds
 * the Kafka client and tool classes and every later JVM of the run maps
 * them from that class-data sharing archive instead of parsing and
 * verifying them again (each test starts the Java client or a Kafka tool,
 * often several times).
 */
public final class LoadClasses {
    public static void main(String[] prefixes) throws Exception {
        ClassLoader loader = LoadClasses.class.getClassLoader();
        int loaded = 0, refused = 0;
        for (String entry : System.getProperty("java.class.path").split(File.pathSeparator)) {
            String name = new File(entry).getName();
            if (!name.endsWith(".jar") || !matches(name, prefixes)) {
                continue;
            }
            try (JarFile jar = new JarFile(entry)) {
                for (Enumeration<JarEntry> es = jar.entries(); es.hasMoreElements();) {
                    String path = es.nextElement().getName();
                    if (!path.endsWith(".class") || path.startsWith("META-INF/") || path.endsWith("module-info.class")) {
                        continue;
                    }
                    String cls = path.substring(0, path.length() - ".class".length()).replace('/', '.');
                    try {
                        Class.forName(cls, false, loader);
                        loaded++;
                    } catch (Throwable t) { // an optional dependency not on the class path
                        refused++;
                    }
                }
            }
        }
        System.out.println("loaded " + loaded + " classes (" + refused + " could not be loaded)");
    }

    private static boolean matches(String name, String[] prefixes) {
        for (String p : prefixes) {
            if (name.startsWith(p)) {
                return true;
            }
        }
        return false;
    }
}
