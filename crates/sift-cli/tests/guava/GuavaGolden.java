// Writes golden files of Guava's BloomFilter (strategy MURMUR128_MITZ_64) for sift's tests.
//
// Run from this directory (see README.md):
//   javac -cp /usr/share/java/guava.jar -d /tmp/guava-golden GuavaGolden.java
//   java -cp /usr/share/java/guava.jar:/tmp/guava-golden GuavaGolden
//
// For each case NAME it writes:
//   NAME.bin     the bytes of BloomFilter.writeTo
//   NAME.keys    the inserted keys, one per line (hex of the bytes for the byte-array funnel)
//   NAME.probes  "key<TAB>true|false": Guava's mightContain for inserted and other keys
// and murmur3_128.tsv: "hex(input)<TAB>hex(Hashing.murmur3_128().hashBytes(input).asBytes())".
import com.google.common.hash.BloomFilter;
import com.google.common.hash.Funnel;
import com.google.common.hash.Funnels;
import com.google.common.hash.Hashing;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;

public class GuavaGolden {
    static String hex(byte[] b) {
        StringBuilder s = new StringBuilder();
        for (byte x : b) s.append(String.format("%02x", x & 0xff));
        return s.toString();
    }

    static void strings(String name, int expected, double fpp, int inserts, int probes) throws IOException {
        Funnel<CharSequence> f = Funnels.stringFunnel(StandardCharsets.UTF_8);
        BloomFilter<CharSequence> bf = BloomFilter.create(f, expected, fpp);
        try (PrintWriter keys = new PrintWriter(name + ".keys", "UTF-8")) {
            for (int i = 0; i < inserts; i++) {
                String k = (i % 7 == 3) ? "clé-" + i + "-日本" : "key-" + i;
                bf.put(k);
                keys.print(k + "\n");
            }
        }
        try (OutputStream out = new FileOutputStream(name + ".bin")) {
            bf.writeTo(out);
        }
        try (PrintWriter p = new PrintWriter(name + ".probes", "UTF-8")) {
            for (int i = 0; i < probes; i++) {
                String k = (i % 7 == 3) ? "clé-" + i + "-日本" : "key-" + i;
                p.print(k + "\t" + bf.mightContain(k) + "\n");
            }
        }
    }

    static byte[] bytesKey(int i) {
        byte[] b = new byte[i % 23];
        for (int j = 0; j < b.length; j++) b[j] = (byte) (i * 31 + j * 17);
        return b;
    }

    static void bytes(String name, int expected, double fpp, int inserts, int probes) throws IOException {
        BloomFilter<byte[]> bf = BloomFilter.create(Funnels.byteArrayFunnel(), expected, fpp);
        try (PrintWriter keys = new PrintWriter(name + ".keys", "UTF-8")) {
            for (int i = 0; i < inserts; i++) {
                bf.put(bytesKey(i));
                keys.print(hex(bytesKey(i)) + "\n");
            }
        }
        try (OutputStream out = new FileOutputStream(name + ".bin")) {
            bf.writeTo(out);
        }
        try (PrintWriter p = new PrintWriter(name + ".probes", "UTF-8")) {
            for (int i = 0; i < probes; i++) {
                p.print(hex(bytesKey(i)) + "\t" + bf.mightContain(bytesKey(i)) + "\n");
            }
        }
    }

    public static void main(String[] args) throws IOException {
        strings("strings_1000_0.01", 1000, 0.01, 500, 3000);
        strings("strings_100_0.3", 100, 0.3, 150, 2000);
        strings("strings_50_1e-6", 50, 1e-6, 50, 1000);
        bytes("bytes_200_0.03", 200, 0.03, 200, 2000);
        try (PrintWriter p = new PrintWriter("murmur3_128.tsv", "UTF-8")) {
            byte[] all = new byte[256];
            for (int i = 0; i < 256; i++) all[i] = (byte) i;
            for (int len = 0; len <= 40; len++) {
                byte[] in = java.util.Arrays.copyOf(all, len);
                p.print(hex(in) + "\t" + hex(Hashing.murmur3_128().hashBytes(in).asBytes()) + "\n");
            }
            for (String s : new String[] {"hello", "The quick brown fox jumps over the lazy dog", "日本語"}) {
                byte[] in = s.getBytes(StandardCharsets.UTF_8);
                p.print(hex(in) + "\t" + hex(Hashing.murmur3_128().hashBytes(in).asBytes()) + "\n");
            }
            p.print(hex(all) + "\t" + hex(Hashing.murmur3_128().hashBytes(all).asBytes()) + "\n");
        }
    }
}
